// Command yaml-reference decodes a stream of manifests exactly as `kubectl apply -f` reads a
// file, for probelint's differential tests: apimachinery's YAMLOrJSONDecoder (which cuts YAML
// streams with its YAMLReader and converts each document with sigs.k8s.io/yaml, or decodes a
// JSON stream as JSON) into a runtime.RawExtension, then the same trimming and skipping as
// cli-runtime's StreamVisitor (k8s.io/cli-runtime/pkg/resource/visitor.go): a document that is
// empty or `null` is no object. Separately, each document the YAMLReader cuts is converted with
// sigs.k8s.io/yaml's YAMLToJSONStrict, which refuses duplicate keys, as strict decoding does.
//
// One input, from stdin to EOF, gives one JSON line on stdout:
//
//	{"documents":[...],"error":"...","error_line":3,"strict":[{"document":1,"error":"..."}]}
//
// error_line is the line of the file that kubectl's error points at (see errorLine), 0 when it
// names none.
//
// With -serve it answers many: each request is a decimal byte count on a line of its own, then
// that many bytes; each answer is one JSON line as above. EOF on stdin ends it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The buffer size kubectl's StreamVisitor gives NewYAMLOrJSONDecoder.
const kubectlBufferSize = 4096

type strictResult struct {
	// 1-based index of the document among those the YAMLReader cuts (empty ones included).
	Document int    `json:"document"`
	Error    string `json:"error"`
}

type answer struct {
	// Each object kubectl would send, as the JSON it converts the document to.
	Documents []json.RawMessage `json:"documents"`
	// The error that ends the stream for kubectl, if any ("" when it reads to the end).
	Error string `json:"error"`
	// The 1-based line of the file where that error is, from the line go-yaml names in its
	// piece of the stream (errorLine); 0 when it names none.
	ErrorLine int `json:"error_line"`
	// What strict decoding says of each YAML document it refuses (empty for a JSON stream).
	Strict []strictResult `json:"strict"`
}

func decode(input []byte) answer {
	result := answer{Documents: []json.RawMessage{}, Strict: []strictResult{}}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(input), kubectlBufferSize)
	_, _, isJSON := utilyaml.GuessJSONStream(bytes.NewReader(input), kubectlBufferSize)
	for decoded := 0; ; decoded++ {
		ext := runtime.RawExtension{}
		if err := decoder.Decode(&ext); err != nil {
			if !errors.Is(err, io.EOF) {
				result.Error = err.Error()
				if !isJSON {
					result.ErrorLine = errorLine(input, decoded, result.Error)
				}
			}
			break
		}
		raw := bytes.TrimSpace(ext.Raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		result.Documents = append(result.Documents, json.RawMessage(raw))
	}
	if isJSON {
		return result
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(input)))
	for index := 1; ; index++ {
		document, err := reader.Read()
		if err != nil {
			break
		}
		if _, err := yaml.YAMLToJSONStrict(document); err != nil {
			result.Strict = append(result.Strict, strictResult{Document: index, Error: err.Error()})
		}
	}
	return result
}

// The problems go-yaml's parser (parserc.go) reports, and its scanner's (scannerc.go). The
// parser names the line of its mark counted from 0, the scanner from 1 (decode.go,
// `(*parser).fail`), so the same line reads one less in a parser error; on the first line of a
// piece (0 either way) the message names no line. Any other message is the decoder's (an
// unknown anchor, a bad merge or tag), which names no place.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected key":              true,
	"did not find expected '-' indicator":    true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

var scannerProblems = map[string]bool{
	"block sequence entries are not allowed in this context":       true,
	"could not find expected ':'":                                  true,
	"could not find expected directive name":                       true,
	"did not find expected alphabetic or numeric character":        true,
	"did not find expected comment or line break":                  true,
	"did not find expected digit or '.' character":                 true,
	"did not find expected hexdecimal number":                      true,
	"did not find expected version number":                         true,
	"did not find expected whitespace":                             true,
	"did not find expected whitespace or line break":               true,
	"did not find the expected '>'":                                true,
	"found a tab character that violates indentation":              true,
	"found a tab character where an indentation space is expected": true,
	"found an indentation indicator equal to 0":                    true,
	"found character that cannot start any token":                  true,
	"found extremely long version number":                          true,
	"found invalid Unicode character escape code":                  true,
	"found unexpected document indicator":                          true,
	"found unexpected end of stream":                               true,
	"found unexpected non-alphabetical character":                  true,
	"found unknown directive name":                                 true,
	"found unknown escape character":                               true,
	"mapping keys are not allowed in this context":                 true,
	"mapping values are not allowed in this context":               true,
}

var yamlLine = regexp.MustCompile(`^error converting YAML to JSON: yaml: (?:line (\d+): )?(.*)$`)

// errorLine is the 1-based line of input where kubectl's error message points, for a YAML
// stream whose piece number `piece` (from 0, as the YAMLReader cuts them) failed: go-yaml
// names a line of that piece (none for its first line), and the piece starts after the
// separators before it. An invalid separator is that line. 0 when the message names no place
// (a key or value that has no JSON form).
func errorLine(input []byte, piece int, message string) int {
	lines := bytes.SplitAfter(input, []byte("\n"))
	if strings.HasPrefix(message, "invalid Yaml document separator: ") {
		for i, line := range lines {
			rest := strings.TrimSpace(string(line[min(3, len(line)):]))
			if bytes.HasPrefix(line, []byte("---")) && rest != "" && rest[0] != '#' {
				return i + 1
			}
		}
		return 0
	}
	match := yamlLine.FindStringSubmatch(message)
	if match == nil || !parserProblems[match[2]] && !scannerProblems[match[2]] {
		return 0
	}
	inPiece := 1
	if match[1] != "" {
		inPiece, _ = strconv.Atoi(match[1])
		if parserProblems[match[2]] {
			inPiece++
		}
	}
	// The YAMLReader's pieces: a `---` line ends a piece that has lines, and is dropped; any
	// other line, and a `---` line that ends none, is a piece's first line when none is open.
	seen, open := -1, false
	for i, line := range lines {
		if len(line) == 0 {
			break
		}
		if open && bytes.HasPrefix(line, []byte("---")) {
			open = false
			continue
		}
		if !open {
			open = true
			seen++
			if seen == piece {
				return i + inPiece
			}
		}
	}
	return 0
}

func write(out *bufio.Writer, result answer) error {
	line, err := json.Marshal(result)
	if err != nil {
		return err
	}
	if _, err := out.Write(append(line, '\n')); err != nil {
		return err
	}
	return out.Flush()
}

func serve(in *bufio.Reader, out *bufio.Writer) error {
	for {
		header, err := in.ReadString('\n')
		if errors.Is(err, io.EOF) && header == "" {
			return nil
		}
		if err != nil {
			return err
		}
		size, err := strconv.Atoi(strings.TrimSpace(header))
		if err != nil || size < 0 {
			return fmt.Errorf("bad request header %q", header)
		}
		input := make([]byte, size)
		if _, err := io.ReadFull(in, input); err != nil {
			return err
		}
		if err := write(out, decode(input)); err != nil {
			return err
		}
	}
}

func main() {
	serveMode := flag.Bool("serve", false, "answer length-prefixed requests until EOF")
	flag.Parse()
	out := bufio.NewWriter(os.Stdout)
	var err error
	if *serveMode {
		err = serve(bufio.NewReader(os.Stdin), out)
	} else {
		var input []byte
		if input, err = io.ReadAll(os.Stdin); err == nil {
			err = write(out, decode(input))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "yaml-reference:", err)
		os.Exit(2)
	}
}
