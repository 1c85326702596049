//! Plain HTTP/1.1 to the pod's own port over std's `TcpStream`: no TLS, no async runtime, so the
//! binary stays small and a probe costs one process. One request per connection
//! (`Connection: close`); bodies are capped at 1 MiB; chunked answers (uvicorn sends them when a
//! handler sets no length, as Prometheus' ASGI app does) are decoded.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The most of an answer that is read: a probe has no use for more.
const MAX_ANSWER: u64 = 1 << 20;

pub struct Target<'a> {
    pub host: &'a str,
    pub port: u16,
    pub timeout: Duration,
}

pub struct Response {
    pub status: u16,
    pub body: String,
}

impl Response {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

pub fn request(
    t: &Target<'_>,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<Response, String> {
    let addr = (t.host, t.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}:{}: {e}", t.host, t.port))?
        .next()
        .ok_or(format!("{}:{}: no address", t.host, t.port))?;
    let mut s =
        TcpStream::connect_timeout(&addr, t.timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(t.timeout)).ok();
    s.set_write_timeout(Some(t.timeout)).ok();
    let b = body.unwrap_or("");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}:{}\r\nConnection: close\r\nAccept: */*\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
        t.host,
        t.port,
        b.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("{method} {path}: {e}"))?;
    let mut raw = Vec::new();
    s.take(MAX_ANSWER)
        .read_to_end(&mut raw)
        .map_err(|e| format!("{method} {path}: {e}"))?;
    parse(&raw).ok_or(format!("{method} {path}: no HTTP status in the answer"))
}

fn parse(raw: &[u8]) -> Option<Response> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let rest = &raw[split + 4..];
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let chunked = head.lines().skip(1).any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
        })
    });
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    Some(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Chunked transfer coding (RFC 9112 §7.1); a truncated answer keeps what arrived.
fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size_line = String::from_utf8_lossy(&rest[..eol]);
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size_hex, 16) else {
            break;
        };
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        rest = rest.get(take + 2..).unwrap_or(&[]);
    }
    out
}

/// The start of a body (200 characters: enough for a health answer's verdict, short of the
/// Event's limit), quoted, for a one-line message.
pub fn snippet(body: &str) -> String {
    let t: String = body.trim().chars().take(200).collect();
    if t.is_empty() {
        String::new()
    } else {
        format!(" {t:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_and_plain_bodies_read_the_same() {
        let plain = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello").unwrap();
        let chunked = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=y\r\nlo\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(plain.body, "hello");
        assert_eq!(chunked.body, "hello");
        assert_eq!(chunked.status, 200);
    }

    #[test]
    fn an_answer_without_a_status_line_is_none() {
        assert!(parse(b"garbage").is_none());
        assert!(parse(b"HTTP/1.1 abc\r\n\r\n").is_none());
    }
}
