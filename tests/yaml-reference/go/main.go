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
//	{"documents":[...],"error":"...","strict":[{"document":1,"error":"..."}]}
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
	// What strict decoding says of each YAML document it refuses (empty for a JSON stream).
	Strict []strictResult `json:"strict"`
}

func decode(input []byte) answer {
	result := answer{Documents: []json.RawMessage{}, Strict: []strictResult{}}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(input), kubectlBufferSize)
	for {
		ext := runtime.RawExtension{}
		if err := decoder.Decode(&ext); err != nil {
			if !errors.Is(err, io.EOF) {
				result.Error = err.Error()
			}
			break
		}
		raw := bytes.TrimSpace(ext.Raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		result.Documents = append(result.Documents, json.RawMessage(raw))
	}
	if _, _, isJSON := utilyaml.GuessJSONStream(bytes.NewReader(input), kubectlBufferSize); isJSON {
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
