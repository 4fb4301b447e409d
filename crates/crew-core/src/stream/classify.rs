//! Is a worker's error message worth a retry?
//!
//! The patterns are pi-crew's (`model-fallback.ts`): transient provider trouble is retryable,
//! anything about credentials or money never is, and "never" wins when both match (a 429 that
//! says "billing" will not clear by waiting). The `regex` crate matches in linear time, so a
//! hostile message cannot stall the daemon.

use regex::Regex;
use std::sync::OnceLock;

const RETRYABLE: &str = r"(?i)rate.?limit|too many requests|\b429\b|\b529\b|quota|provider.*unavailable|model.*(unavailable|disabled|not found)|unknown model|overloaded|service unavailable|temporar(il)?y unavailable|connection refused|connection reset|fetch failed|network error|socket hang up|upstream|timed? out|timeout|\b50[0-4]\b|api_error|unknown error|internal[_ ]error|server error|bad gateway|provider[_ ]?error|context[_ ]?length[_ ]?exceeded|safety|\b408\b";

/// The model itself is out of capacity for us (rate limit, overload, quota): another model may
/// answer where more retries on this one will not. Gemini says `RESOURCE_EXHAUSTED`.
const CAPACITY: &str = r"(?i)rate.?limit|too many requests|\b429\b|\b529\b|overloaded|quota|resource.?exhausted|capacity";

const NEVER_RETRYABLE: &str = r"(?i)\bauth(entication|orization)?(\b|_)|unauthori[sz]ed|forbidden|api[_ -]?key|token expired|invalid key|billing|credit|argument list too long";

fn compiled(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

fn retryable() -> Option<&'static Regex> {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&CELL, RETRYABLE)
}

fn never_retryable() -> Option<&'static Regex> {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&CELL, NEVER_RETRYABLE)
}

fn capacity() -> Option<&'static Regex> {
    static CELL: OnceLock<Option<Regex>> = OnceLock::new();
    compiled(&CELL, CAPACITY)
}

/// True when `msg` says the model is rate limited or overloaded (and not that the account has
/// a credential or billing problem): the case where a task moves on to a fallback model.
pub fn is_capacity_message(msg: &str) -> bool {
    if never_retryable().is_some_and(|re| re.is_match(msg)) {
        return false;
    }
    capacity().is_some_and(|re| re.is_match(msg))
}

/// True when `msg` reads like a transient failure (rate limit, overload, 5xx, network) and not
/// like a credential or billing problem.
pub fn is_retryable_message(msg: &str) -> bool {
    if never_retryable().is_some_and(|re| re.is_match(msg)) {
        return false;
    }
    retryable().is_some_and(|re| re.is_match(msg))
}

/// Is a failure to start the worker's program worth a retry? A program that is missing or may
/// not be executed will not appear by waiting; anything else (out of processes, a busy file)
/// may clear.
pub fn is_retryable_spawn_error(kind: std::io::ErrorKind) -> bool {
    !matches!(
        kind,
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_errors() {
        use std::io::ErrorKind;
        assert!(!is_retryable_spawn_error(ErrorKind::NotFound));
        assert!(!is_retryable_spawn_error(ErrorKind::PermissionDenied));
        assert!(is_retryable_spawn_error(ErrorKind::WouldBlock));
        assert!(is_retryable_spawn_error(ErrorKind::OutOfMemory));
    }

    #[test]
    fn patterns_compile() {
        assert!(retryable().is_some());
        assert!(never_retryable().is_some());
        assert!(capacity().is_some());
    }

    #[test]
    fn capacity_messages() {
        let table: &[(&str, bool)] = &[
            ("429 Too Many Requests", true),
            ("rate_limit_error: slow down", true),
            ("API Error: 529 {\"type\":\"overloaded_error\"}", true),
            ("Overloaded", true),
            ("You exceeded your current quota", true),
            ("RESOURCE_EXHAUSTED", true),
            ("exceeded retry limit, last status: 429", true),
            // retryable, but another model would not help
            ("503 Service Unavailable", false),
            ("connection reset", false),
            ("request timed out", false),
            // never
            ("429 quota exceeded, check billing", false),
            ("invalid api key", false),
            ("error 4290", false),
        ];
        for (msg, want) in table {
            assert_eq!(is_capacity_message(msg), *want, "{msg:?}");
        }
    }

    #[test]
    fn classifies_messages() {
        let table: &[(&str, bool)] = &[
            ("429 rate_limit_error: overloaded (fake)", true),
            ("Rate limit reached for requests", true),
            ("Too Many Requests", true),
            ("HTTP 429", true),
            ("You exceeded your current quota", true),
            ("provider openai is unavailable", true),
            ("model gpt-9 not found", true),
            ("unknown model 'foo'", true),
            ("Overloaded", true),
            ("503 Service Unavailable", true),
            ("temporarily unavailable", true),
            ("connect ECONNREFUSED: connection refused", true),
            ("TypeError: fetch failed", true),
            ("network error", true),
            ("socket hang up", true),
            ("upstream connect error", true),
            ("request timed out", true),
            ("Request timeout", true),
            ("502 Bad Gateway", true),
            ("500", true),
            ("504 gateway", true),
            ("Provider error: api_error", true),
            ("unknown error occurred", true),
            ("internal_error", true),
            ("Internal server error", true),
            ("provider_error", true),
            ("context_length_exceeded", true),
            ("blocked by safety filter", true),
            ("408 Request Timeout", true),
            // The status alone: a 529 body need not say "Overloaded".
            (
                "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"x\"}}",
                true,
            ),
            // never retryable
            ("invalid api key (fake)", false),
            ("Incorrect API key provided", false),
            ("invalid x-api-key", false),
            ("authentication_error: invalid token", false),
            ("401 Unauthorized", false),
            ("403 Forbidden", false),
            ("OAuth token expired", false),
            ("invalid key", false),
            ("billing hard limit reached", false),
            ("Your credit balance is too low", false),
            ("429 quota exceeded, check billing", false),
            ("auth failed", false),
            // A prompt too long for argv stays too long on every attempt.
            (
                "failed to start `claude`: Argument list too long (os error 7)",
                false,
            ),
            // neither
            ("", false),
            ("the tests fail", false),
            ("5000 lines", false),
            ("error 4290", false),
            ("5290 tokens", false),
            ("written by the author", false),
        ];
        for (msg, want) in table {
            assert_eq!(is_retryable_message(msg), *want, "{msg:?}");
        }
    }

    #[test]
    fn long_hostile_input_is_fine() {
        let msg = "model ".repeat(200_000) + "x";
        assert!(!is_retryable_message(&msg));
        let msg = "a".repeat(1_000_000) + " overloaded";
        assert!(is_retryable_message(&msg));
    }
}
