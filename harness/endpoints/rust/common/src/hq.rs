//! HTTP/0.9 over QUIC ("hq-interop", the QUIC Interop Runner's protocol): the
//! client sends `GET /NAME\r\n` and FIN on a new bidirectional stream, the server
//! answers with the file's bytes and FIN. An upload (LL_DIRECTION=upload, ours) is
//! the mirror: `PUT /NAME\r\n`, the file's bytes and FIN; the server stores them and
//! answers with FIN alone once it has them all.

use std::path::{Path, PathBuf};

use crate::exit::Failure;

/// The ALPN protocol name; `ALPN_WIRE` is its length-prefixed wire form.
pub const ALPN: &[u8] = b"hq-interop";
pub const ALPN_WIRE: &[u8] = b"\x0ahq-interop";

/// A request line longer than this is refused rather than buffered without end.
pub const MAX_REQUEST_LINE: usize = 4096;

/// One entry of REQUESTS: `https://HOST:PORT/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub host: String,
    pub port: u16,
    /// `host:port` as written, to check that all requests go to one server.
    pub server: String,
    /// The file name, without the leading slash.
    pub name: String,
}

impl Request {
    pub fn from_url(url: &str) -> Result<Request, Failure> {
        let bad = |why: &str| Failure::Fatal(format!("bad request URL {url:?}: {why}"));
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| bad("not https://"))?;
        let (server, path) = rest.split_once('/').ok_or_else(|| bad("no path"))?;
        let (host, port) = match server.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && !p.contains(']') => {
                (h.to_string(), p.parse().map_err(|_| bad("bad port"))?)
            }
            _ => (server.to_string(), 443),
        };
        let name = path.to_string();
        check_name(&name).map_err(|e| bad(&e))?;
        Ok(Request {
            host,
            port,
            server: server.to_string(),
            name,
        })
    }

    /// The request line the client sends.
    pub fn line(&self) -> Vec<u8> {
        format!("GET /{}\r\n", self.name).into_bytes()
    }

    /// The line that starts an upload; the file's bytes follow it on the stream.
    pub fn put_line(&self) -> Vec<u8> {
        format!("PUT /{}\r\n", self.name).into_bytes()
    }

    /// Where the client stores the response.
    pub fn download_path(&self, downloads: &Path) -> PathBuf {
        downloads.join(&self.name)
    }

    /// The server name for TLS: the host unless it is an IP literal.
    pub fn sni(&self) -> Option<&str> {
        let bare = self.host.trim_start_matches('[').trim_end_matches(']');
        bare.parse::<std::net::IpAddr>().is_err().then_some(bare)
    }
}

/// Names are served from one flat directory: no separators, no `..`, no empties.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('/') || name.contains('\\') || name == "." || name == ".." {
        return Err(format!("file name {name:?} must be a plain name in LL_WWW"));
    }
    Ok(())
}

/// Parses the request on a server stream once `buf` holds the whole line.
///
/// Returns Ok(None) while the line is incomplete and `fin` has not arrived; the
/// line ends at CRLF, LF, or the stream's FIN (some clients omit the newline).
pub fn parse_request(buf: &[u8], fin: bool) -> Result<Option<String>, String> {
    let end = buf.iter().position(|&b| b == b'\n');
    let line = match (end, fin) {
        (Some(i), _) => &buf[..i],
        (None, true) => buf,
        (None, false) if buf.len() > MAX_REQUEST_LINE => return Err("request line too long".into()),
        (None, false) => return Ok(None),
    };
    let line = std::str::from_utf8(line).map_err(|_| "request line is not UTF-8".to_string())?;
    let line = line.trim_end_matches('\r').trim();
    let path = line
        .strip_prefix("GET ")
        .ok_or_else(|| format!("not a GET request: {line:?}"))?
        .trim();
    let name = path.strip_prefix('/').unwrap_or(path).to_string();
    check_name(&name)?;
    Ok(Some(name))
}

/// Parses an upload's first line once `buf` holds it: the name and where the body
/// starts. The line must end in LF (the body follows it); None while it has not.
pub fn parse_upload(buf: &[u8]) -> Result<Option<(String, usize)>, String> {
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > MAX_REQUEST_LINE {
            Err("request line too long".into())
        } else {
            Ok(None)
        };
    };
    let line =
        std::str::from_utf8(&buf[..end]).map_err(|_| "request line is not UTF-8".to_string())?;
    let line = line.trim_end_matches('\r').trim();
    let path = line
        .strip_prefix("PUT ")
        .ok_or_else(|| format!("not a PUT request: {line:?}"))?
        .trim();
    let name = path.strip_prefix('/').unwrap_or(path).to_string();
    check_name(&name)?;
    Ok(Some((name, end + 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_and_line() {
        let r = Request::from_url("https://127.0.0.1:4433/file.bin").unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.name.as_str()),
            ("127.0.0.1", 4433, "file.bin")
        );
        assert_eq!(r.line(), b"GET /file.bin\r\n");
        assert_eq!(r.sni(), None);
        assert!(Request::from_url("https://h:1/../etc/passwd").is_err());
    }

    #[test]
    fn request_parsing() {
        assert_eq!(parse_request(b"GET /a", false).unwrap(), None);
        assert_eq!(parse_request(b"GET /a", true).unwrap(), Some("a".into()));
        assert_eq!(
            parse_request(b"GET /a\r\n", false).unwrap(),
            Some("a".into())
        );
        assert!(parse_request(b"GET /../x\r\n", false).is_err());
        assert!(parse_request(b"PUT /x\r\n", false).is_err());
    }

    #[test]
    fn upload_parsing() {
        assert_eq!(parse_upload(b"PUT /a").unwrap(), None);
        assert_eq!(
            parse_upload(b"PUT /a\r\nxyz").unwrap(),
            Some(("a".into(), 8))
        );
        assert!(parse_upload(b"GET /a\r\n").is_err());
        assert!(parse_upload(b"PUT /../x\r\n").is_err());
        let r = Request::from_url("https://h:1/f").unwrap();
        assert_eq!(r.put_line(), b"PUT /f\r\n");
    }
}
