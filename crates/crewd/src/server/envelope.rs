//! The JSON-RPC 2.0 envelope, judged before jsonrpsee sees a request (`front.rs` forwards what
//! this module accepts). jsonrpsee answers a valid-JSON but invalid request with -32700, takes an
//! id it cannot represent (`-1`, `1.5`) for a notification and never answers it, ignores ids of
//! a wrong type, and answers notifications with `null`; here each request object is read exactly
//! as the specification (section 4 and 5) says.
//!
//! Bounded: the body is read with serde_json into `RawValue`s, which serde_json skips without
//! recursion (its `ignore_value` keeps its own stack of one byte per level), and request objects
//! are read one level deep; nothing here recurses on the depth a client chose.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// One request object of a body.
#[derive(Debug, PartialEq)]
pub enum Entry<'a> {
    /// A call (`id` present) or a notification (`id` absent).
    Request(Request<'a>),
    /// Not a request object: answered with -32600, with its id when that could be read.
    Invalid { id: Option<&'a str>, why: String },
}

#[derive(Debug, PartialEq)]
pub struct Request<'a> {
    /// The id's JSON text, as the client wrote it; `None` for a notification.
    pub id: Option<&'a str>,
    /// The method's JSON text (a string).
    pub method: &'a str,
    /// The params' JSON text (an object or an array), if given.
    pub params: Option<&'a str>,
}

impl Request<'_> {
    /// jsonrpsee holds the id as it is (null, a string, an unsigned 64-bit integer); any other
    /// number must be replaced on the way in and put back in the answer.
    pub fn id_needs_rewrite(&self) -> bool {
        self.id.is_some_and(|id| !id_is_plain(id))
    }

    /// The request as jsonrpsee will read it, with `id` (JSON text) in place of the client's.
    pub fn canonical(&self, id: Option<&str>) -> String {
        let mut out = String::with_capacity(
            48 + self.method.len() + self.params.map_or(0, str::len) + id.map_or(0, str::len),
        );
        out.push_str(r#"{"jsonrpc":"2.0","#);
        if let Some(id) = id {
            out.push_str(r#""id":"#);
            out.push_str(id);
            out.push(',');
        }
        out.push_str(r#""method":"#);
        out.push_str(self.method);
        if let Some(p) = self.params {
            out.push_str(r#","params":"#);
            out.push_str(p);
        }
        out.push('}');
        out
    }
}

/// A whole body.
#[derive(Debug, PartialEq)]
pub enum Body<'a> {
    /// Not JSON at all: -32700.
    ParseError,
    Single(Entry<'a>),
    /// A non-empty array (an empty one is `Single(Invalid)`, as section 6 says).
    Batch(Vec<Entry<'a>>),
    /// More entries than `max_batch`.
    BatchTooLarge {
        len: usize,
    },
}

fn first_byte(text: &[u8]) -> Option<u8> {
    text.iter().copied().find(|b| !b.is_ascii_whitespace())
}

/// Judge a body (HTTP POST body or WebSocket message).
pub fn judge(body: &[u8], max_batch: usize) -> Body<'_> {
    let Ok(text) = std::str::from_utf8(body) else {
        return Body::ParseError;
    };
    match first_byte(body) {
        Some(b'[') => match serde_json::from_str::<Vec<&RawValue>>(text) {
            Err(_) => Body::ParseError,
            Ok(items) if items.is_empty() => Body::Single(Entry::Invalid {
                id: None,
                why: "an empty batch".into(),
            }),
            Ok(items) if items.len() > max_batch => Body::BatchTooLarge { len: items.len() },
            Ok(items) => Body::Batch(items.into_iter().map(entry).collect()),
        },
        _ => match serde_json::from_str::<&RawValue>(text) {
            Err(_) => Body::ParseError,
            Ok(raw) => Body::Single(entry(raw)),
        },
    }
}

/// Null, a string, or an unsigned integer that fits 64 bits, written plainly.
fn id_is_plain(id: &str) -> bool {
    id == "null"
        || id.starts_with('"')
        || (id.bytes().all(|b| b.is_ascii_digit()) && id.parse::<u64>().is_ok())
}

/// What a request's `id` may be: null, a string or a number (section 4).
fn id_is_valid(id: &str) -> bool {
    matches!(
        id.as_bytes().first(),
        Some(b'n' | b'"' | b'-' | b'0'..=b'9')
    )
}

/// A map key, borrowed when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// The members of a request object, each as raw JSON text; duplicates noted.
#[derive(Default)]
struct Members<'a> {
    jsonrpc: Option<&'a str>,
    method: Option<&'a str>,
    params: Option<&'a str>,
    id: Option<&'a str>,
    duplicate: Option<&'static str>,
}

impl<'de> serde::Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a request object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut m = Members::default();
                while let Some(key) = map.next_key::<Key<'de>>()? {
                    let (slot, name) = match key.0.as_ref() {
                        "jsonrpc" => (&mut m.jsonrpc, "jsonrpc"),
                        "method" => (&mut m.method, "method"),
                        "params" => (&mut m.params, "params"),
                        "id" => (&mut m.id, "id"),
                        // Other members are not the specification's; they are ignored, as
                        // jsonrpsee ignores them.
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    let value = map.next_value::<&'de RawValue>()?.get();
                    if slot.is_some() {
                        m.duplicate.get_or_insert(name);
                    }
                    *slot = Some(value);
                }
                Ok(m)
            }
        }
        d.deserialize_map(V)
    }
}

fn invalid<'a>(id: Option<&'a str>, why: &str) -> Entry<'a> {
    Entry::Invalid {
        id,
        why: why.to_string(),
    }
}

/// Judge one request object (already known to be valid JSON).
fn entry(raw: &RawValue) -> Entry<'_> {
    let text = raw.get();
    if first_byte(text.as_bytes()) != Some(b'{') {
        return Entry::Invalid {
            id: None,
            why: "a request must be an object".into(),
        };
    }
    let m: Members<'_> = match serde_json::from_str(text) {
        Ok(m) => m,
        // Valid JSON (checked by the caller) whose keys or values serde_json would not borrow:
        // still not a request we can read.
        Err(e) => {
            return Entry::Invalid {
                id: None,
                why: format!("unreadable request object: {e}"),
            }
        }
    };
    // An id that is there but not of a valid type (or twice there) cannot be answered with.
    let id_ok = m.id.is_none_or(id_is_valid) && m.duplicate != Some("id");
    let answer_id = if id_ok { m.id } else { None };
    if m.duplicate == Some("id") {
        return invalid(None, "the member `id` is given twice");
    }
    if !id_ok {
        return invalid(None, "id must be a string, a number or null");
    }
    if let Some(name) = m.duplicate {
        return invalid(answer_id, &format!("the member `{name}` is given twice"));
    }
    if m.jsonrpc != Some(r#""2.0""#) {
        return invalid(answer_id, r#"jsonrpc must be exactly "2.0""#);
    }
    let Some(method) = m.method.filter(|t| t.starts_with('"')) else {
        return invalid(answer_id, "method must be a string");
    };
    if m.params
        .is_some_and(|p| !matches!(p.as_bytes().first(), Some(b'{' | b'[')))
    {
        return invalid(answer_id, "params must be an object or an array");
    }
    Entry::Request(Request {
        id: m.id,
        method,
        params: m.params,
    })
}

/// An error answer (JSON text) with `id` (JSON text; null when `None`).
pub fn error_text(id: Option<&str>, err: crew_api::ApiError) -> String {
    let obj = jsonrpsee::types::ErrorObjectOwned::from(err);
    let obj = serde_json::to_string(&obj)
        .unwrap_or_else(|_| r#"{"code":-32603,"message":"internal error"}"#.to_string());
    format!(
        r#"{{"jsonrpc":"2.0","error":{obj},"id":{}}}"#,
        id.unwrap_or("null")
    )
}

/// The answer to a body that is not JSON.
pub fn parse_error_text() -> String {
    error_text(
        None,
        crew_api::ApiError::new(
            crew_api::codes::PARSE_ERROR,
            "parse error: the body is not JSON",
        ),
    )
}

pub fn invalid_text(id: Option<&str>, why: &str) -> String {
    error_text(id, crew_api::ApiError::invalid_request(why))
}

pub fn batch_too_large_text(len: usize, max: usize) -> String {
    error_text(
        None,
        crew_api::ApiError::limit_named(
            "max_batch",
            max as u64,
            format!("the batch is too large: {len} requests, at most {max} (max_batch)"),
        ),
    )
}

/// Put `id` (JSON text) back in place of the string id `sentinel` in jsonrpsee's answer, which
/// always begins `{"jsonrpc":"2.0","id":<id>,`. `None` when the answer is not of that shape.
pub fn splice_id(answer: &str, sentinel: &str, id: &str) -> Option<String> {
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":""#;
    let rest = answer
        .strip_prefix(HEAD)?
        .strip_prefix(sentinel)?
        .strip_prefix('"')?;
    let mut out = String::with_capacity(answer.len() + id.len());
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(id);
    out.push_str(rest);
    Some(out)
}

/// The string id of an answer if it starts with `prefix` (the connection's sentinel prefix):
/// the number after it.
pub fn sentinel_number(answer: &str, prefix: &str) -> Option<u64> {
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":""#;
    let rest = answer.strip_prefix(HEAD)?.strip_prefix(prefix)?;
    let end = rest.find('"')?;
    rest.get(..end)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(body: &str) -> Entry<'_> {
        match judge(body.as_bytes(), 64) {
            Body::Single(e) => e,
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn request_objects_are_read_as_the_specification_says() {
        let ok = |body: &str, id: Option<&str>| match single(body) {
            Entry::Request(r) => assert_eq!(r.id, id, "{body}"),
            e => panic!("{body}: {e:?}"),
        };
        ok(r#"{"jsonrpc":"2.0","method":"a","id":1}"#, Some("1"));
        ok(r#"{"jsonrpc":"2.0","method":"a","id":"x"}"#, Some(r#""x""#));
        ok(r#"{"jsonrpc":"2.0","method":"a","id":null}"#, Some("null"));
        ok(r#"{"jsonrpc":"2.0","method":"a","id":-1}"#, Some("-1"));
        ok(r#"{"jsonrpc":"2.0","method":"a","id":1.5}"#, Some("1.5"));
        ok(r#"{"jsonrpc":"2.0","method":"a"}"#, None);
        ok(
            r#"{"jsonrpc":"2.0","method":"a","params":[],"extra":{"deep":[[1]]}}"#,
            None,
        );
        ok(r#"{"jsonr\u0070c":"2.0","method":"a"}"#, None);
        let invalid = |body: &str, id: Option<&str>| match single(body) {
            Entry::Invalid { id: got, .. } => assert_eq!(got, id, "{body}"),
            e => panic!("{body}: {e:?}"),
        };
        invalid(r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#, None);
        invalid(r#"{"jsonrpc":"2.0","method":1,"id":7}"#, Some("7"));
        invalid(r#"{"jsonrpc":"1.0","method":"a","id":7}"#, Some("7"));
        invalid(r#"{"method":"a","id":7}"#, Some("7"));
        invalid(
            r#"{"jsonrpc":"2.0","method":"a","params":"x","id":7}"#,
            Some("7"),
        );
        invalid(
            r#"{"jsonrpc":"2.0","method":"a","params":null,"id":7}"#,
            Some("7"),
        );
        invalid(r#"{"jsonrpc":"2.0","method":"a","id":{}}"#, None);
        invalid(r#"{"jsonrpc":"2.0","method":"a","id":[1]}"#, None);
        invalid(r#"{"jsonrpc":"2.0","method":"a","id":true}"#, None);
        invalid(r#"{"jsonrpc":"2.0","method":"a","id":1,"id":2}"#, None);
        invalid(
            r#"{"jsonrpc":"2.0","method":"a","method":"b","id":3}"#,
            Some("3"),
        );
        invalid("42", None);
        invalid(r#""x""#, None);
        invalid("[]", None);
        assert_eq!(judge(b"{", 64), Body::ParseError);
        assert_eq!(judge(b"", 64), Body::ParseError);
        assert_eq!(judge(b"\xff", 64), Body::ParseError);
        assert_eq!(judge(b"[1,2,3", 64), Body::ParseError);
        assert_eq!(judge(b"[1,2,3]", 2), Body::BatchTooLarge { len: 3 });
        match judge(b"[1,2,3]", 64) {
            Body::Batch(v) => assert_eq!(v.len(), 3),
            b => panic!("{b:?}"),
        }
    }

    #[test]
    fn deep_nesting_is_read_without_recursion() {
        let mut body = r#"{"jsonrpc":"2.0","id":1,"method":"a","params":"#.to_string();
        body.push_str(&"[".repeat(200_000));
        body.push_str(&"]".repeat(200_000));
        body.push('}');
        assert!(matches!(single(&body), Entry::Request(_)));
        let batch = format!("[{}]", "[".repeat(200_000) + &"]".repeat(200_000));
        assert!(matches!(judge(batch.as_bytes(), 64), Body::Batch(_)));
        assert_eq!(judge("[".repeat(100_000).as_bytes(), 64), Body::ParseError);
    }

    #[test]
    fn ids_are_rewritten_and_put_back() {
        let Entry::Request(r) = single(r#"{"jsonrpc":"2.0","method":"m","id":-1,"params":{}}"#)
        else {
            panic!()
        };
        assert!(r.id_needs_rewrite());
        assert_eq!(
            r.canonical(Some(r#""s~7""#)),
            r#"{"jsonrpc":"2.0","id":"s~7","method":"m","params":{}}"#
        );
        let answer = r#"{"jsonrpc":"2.0","id":"s~7","result":1}"#;
        assert_eq!(
            splice_id(answer, "s~7", "-1").unwrap(),
            r#"{"jsonrpc":"2.0","id":-1,"result":1}"#
        );
        assert_eq!(sentinel_number(answer, "s~"), Some(7));
        assert_eq!(
            sentinel_number(r#"{"jsonrpc":"2.0","method":"x"}"#, "s~"),
            None
        );
        for plain in ["1", "0", "18446744073709551615", "null", r#""a""#] {
            assert!(id_is_plain(plain), "{plain}");
        }
        for other in ["-1", "1.5", "1e3", "18446744073709551616", "-0"] {
            assert!(!id_is_plain(other), "{other}");
        }
    }
}
