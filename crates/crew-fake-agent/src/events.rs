//! pi's event and message shapes (pi-mono `AgentSessionEvent`, `AssistantMessage`).

use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

pub const MODEL: &str = "fake-1";
pub const PROVIDER: &str = "fake";
const API: &str = "fake";

/// Token usage and cost of one assistant message.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub cost: f64,
}

impl Usage {
    /// Split into `n` parts that add up exactly (remainders go to the last part).
    pub fn split(&self, n: usize) -> Vec<Usage> {
        let n = n.max(1);
        let k = n as u64;
        let part = Usage {
            input: self.input / k,
            output: self.output / k,
            cache_read: self.cache_read / k,
            cache_write: self.cache_write / k,
            cost: self.cost / n as f64,
        };
        let mut parts = vec![part; n];
        if let Some(last) = parts.last_mut() {
            last.input = self.input - part.input * (k - 1);
            last.output = self.output - part.output * (k - 1);
            last.cache_read = self.cache_read - part.cache_read * (k - 1);
            last.cache_write = self.cache_write - part.cache_write * (k - 1);
            last.cost = self.cost - part.cost * (n - 1) as f64;
        }
        parts
    }

    pub fn to_json(self) -> Value {
        let total = self.input + self.output + self.cache_read + self.cache_write;
        let share = |tokens: u64| {
            if total == 0 {
                0.0
            } else {
                self.cost * tokens as f64 / total as f64
            }
        };
        json!({
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "totalTokens": total,
            "cost": {
                "input": share(self.input),
                "output": share(self.output),
                "cacheRead": share(self.cache_read),
                "cacheWrite": share(self.cache_write),
                "total": self.cost,
            },
        })
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A v4-looking id; uniqueness per process is all that matters here.
pub fn session_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let hi = splitmix64(nanos ^ u64::from(std::process::id()).rotate_left(32));
    let lo = splitmix64(hi);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xfff,
        lo >> 52,
        lo & 0xffff_ffff_ffff
    )
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `2026-01-01T00:00:00.000Z` for a Unix time in milliseconds.
pub fn iso_time(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's days→civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        ms % 1000
    )
}

pub fn session_header() -> Value {
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    json!({"type": "session", "version": 3, "id": session_id(), "timestamp": iso_time(now_ms()), "cwd": cwd})
}

pub fn user_message(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": now_ms()})
}

pub fn assistant_message(
    content: Vec<Value>,
    usage: Usage,
    stop_reason: &str,
    error_message: Option<&str>,
) -> Value {
    let mut m = json!({
        "role": "assistant",
        "content": content,
        "api": API,
        "provider": PROVIDER,
        "model": MODEL,
        "usage": usage.to_json(),
        "stopReason": stop_reason,
        "timestamp": now_ms(),
    });
    if let (Some(err), Some(obj)) = (error_message, m.as_object_mut()) {
        obj.insert("errorMessage".into(), Value::String(err.to_owned()));
    }
    m
}

pub fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

pub fn tool_call_part(id: &str, name: &str, args: &Value) -> Value {
    json!({"type": "toolCall", "id": id, "name": name, "arguments": args})
}

pub fn tool_result_message(id: &str, name: &str, text: &str, is_error: bool) -> Value {
    json!({
        "role": "toolResult",
        "toolCallId": id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
        "timestamp": now_ms(),
    })
}

pub fn simple(kind: &str) -> Value {
    json!({"type": kind})
}

pub fn message_event(kind: &str, message: &Value) -> Value {
    json!({"type": kind, "message": message})
}

pub fn update(event: Value) -> Value {
    json!({"type": "message_update", "assistantMessageEvent": event})
}

pub fn tool_start(id: &str, name: &str, args: &Value) -> Value {
    json!({"type": "tool_execution_start", "toolCallId": id, "toolName": name, "args": args})
}

pub fn tool_end(id: &str, name: &str, text: &str, is_error: bool) -> Value {
    json!({
        "type": "tool_execution_end",
        "toolCallId": id,
        "toolName": name,
        "result": {"content": [{"type": "text", "text": text}], "details": {}},
        "isError": is_error,
    })
}

pub fn turn_end(message: &Value, tool_results: &[Value]) -> Value {
    json!({"type": "turn_end", "message": message, "toolResults": tool_results})
}

pub fn agent_end(messages: &[Value]) -> Value {
    json!({"type": "agent_end", "messages": messages})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_adds_up() {
        let u = Usage {
            input: 100,
            output: 20,
            cache_read: 10,
            cache_write: 5,
            cost: 0.0003,
        };
        for n in 1..=7 {
            let parts = u.split(n);
            assert_eq!(parts.len(), n);
            assert_eq!(parts.iter().map(|p| p.input).sum::<u64>(), 100);
            assert_eq!(parts.iter().map(|p| p.output).sum::<u64>(), 20);
            assert_eq!(parts.iter().map(|p| p.cache_read).sum::<u64>(), 10);
            assert_eq!(parts.iter().map(|p| p.cache_write).sum::<u64>(), 5);
            assert!((parts.iter().map(|p| p.cost).sum::<f64>() - 0.0003).abs() < 1e-12);
        }
    }

    #[test]
    fn usage_json_has_pi_shape() {
        let u = Usage {
            input: 100,
            output: 20,
            cache_read: 10,
            cache_write: 5,
            cost: 0.0003,
        }
        .to_json();
        assert_eq!(u["totalTokens"], 135);
        assert_eq!(u["cost"]["total"], 0.0003);
        assert_eq!(u["cacheRead"], 10);
    }

    #[test]
    fn iso_times() {
        let table = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_123, "2000-02-29T00:00:00.123Z"),
            (1_767_225_599_999, "2025-12-31T23:59:59.999Z"),
        ];
        for (ms, want) in table {
            assert_eq!(iso_time(ms), want);
        }
    }

    #[test]
    fn session_ids_look_like_uuids() {
        let id = session_id();
        let lens: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(lens, [8, 4, 4, 4, 12], "{id}");
    }
}
