//! Canonical JSON and the checksum: object keys sorted, no whitespace, floats as 15
//! significant digits (so a parser that is one ulp off cannot break the checksum).

use crate::artifacts::sha256_hex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

fn canonical_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_u64() {
                out.push_str(&i.to_string());
            } else if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else {
                out.push_str(&format!("{:.14e}", n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_into(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            out.push('{');
            for (i, (k, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_into(item, out);
            }
            out.push('}');
        }
    }
}

/// `a` and `b` say the same wherever both say something: fields only one side has are
/// ignored, so a bundle's `run` stays comparable when a later daemon adds a status field.
pub(super) fn agrees(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.iter().all(|(k, v)| y.get(k).is_none_or(|w| agrees(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| agrees(v, w))
        }
        _ => canonical(a) == canonical(b),
    }
}

pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    canonical_into(v, &mut out);
    out
}

/// The checksum of a bundle: over every field but `checksum`.
pub fn checksum(bundle: &Map<String, Value>) -> String {
    let mut rest = bundle.clone();
    rest.remove("checksum");
    sha256_hex(canonical(&Value::Object(rest)).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_and_ignores_layout() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2.5], "x": "s"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":"s","y":[1,2.5]},"b":1}"#).unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            canonical(&a),
            r#"{"a":{"x":"s","y":[1,2.50000000000000e0]},"b":1}"#
        );
        // One ulp apart (a parser without exact float parsing): same canonical form.
        let x = 0.1f64 + 0.2f64;
        let y = f64::from_bits(x.to_bits() + 1);
        assert_eq!(canonical(&json!(x)), canonical(&json!(y)));
    }

    #[test]
    fn run_views_agree_on_shared_fields_only() {
        let base = json!({"run": {"id": "r", "status": "completed"}, "tasks": [{"id": "a"}]});
        let table = [
            (json!({"run": {"id": "r"}, "tasks": [{"id": "a"}]}), true),
            (
                json!({"run": {"id": "r", "status": "completed", "newField": 1}, "tasks": [{"id": "a"}]}),
                true,
            ),
            (
                json!({"run": {"id": "r", "status": "failed"}, "tasks": [{"id": "a"}]}),
                false,
            ),
            (json!({"run": {"id": "r"}, "tasks": []}), false),
            (json!({"run": {"id": "r"}, "tasks": [{"id": "b"}]}), false),
            (json!({"run": "r"}), false),
        ];
        for (other, want) in table {
            assert_eq!(agrees(&other, &base), want, "{other}");
        }
    }
}
