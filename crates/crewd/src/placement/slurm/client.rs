//! A small slurmrestd client: submit, one job, the jobs, cancel. HTTP/1.1 over one TCP
//! connection per call to a loopback address (hyper's client connection, as crew-ui's proxy),
//! with a JWT from a command or a file, fetched again before it expires.

use super::config::SlurmConfig;
use super::state::{parse_job, JobInfo};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Mutex;

/// A token is fetched again when it has less than this left.
const REFRESH_BEFORE: Duration = Duration::from_secs(120);
/// One call may take at most this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest answer read from slurmrestd (a `GET /jobs` of a big cluster is large).
const MAX_BODY: usize = 64 << 20;

#[derive(Debug, Clone, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot reach slurmrestd at {addr}: {message}")]
    Connect { addr: String, message: String },
    #[error("slurmrestd {method} {path}: HTTP {status}: {message}")]
    Http {
        method: &'static str,
        path: String,
        status: u16,
        message: String,
    },
    #[error("slurmrestd {path}: {message}")]
    Answer { path: String, message: String },
    #[error("no Slurm token: {0}")]
    Token(String),
    /// A client command (`interface = "cli"`) failed.
    #[error("{program}: {message}")]
    Command {
        program: &'static str,
        transient: bool,
        message: String,
    },
}

impl SlurmError {
    /// Worth another try later (the daemon or network hiccupped), as opposed to a refusal.
    pub fn is_transient(&self) -> bool {
        match self {
            SlurmError::Connect { .. } | SlurmError::Token(_) => true,
            SlurmError::Http { status, .. } => *status >= 500 || *status == 401,
            SlurmError::Answer { .. } => false,
            SlurmError::Command { transient, .. } => *transient,
        }
    }
}

/// What one job asks of Slurm.
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub name: String,
    pub comment: String,
    pub script: String,
    pub cwd: String,
    pub stdout: String,
    pub resources: super::config::SlurmResources,
    /// The job's environment: no secret ever goes here (slurmctld stores it and shows it to
    /// admins); the worker reads those from its staging directory.
    pub env: Vec<(String, String)>,
}

struct Token {
    value: String,
    expires: u64,
}

pub struct Client {
    addr: String,
    api: String,
    user: String,
    cfg: SlurmConfig,
    token: Mutex<Option<Token>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Client {
    pub fn new(cfg: &SlurmConfig) -> Client {
        let addr = cfg
            .url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or("")
            .to_string();
        let user = cfg.user.clone().unwrap_or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_else(|| "root".into())
        });
        Client {
            addr,
            api: cfg.api_version.clone(),
            user,
            cfg: cfg.clone(),
            token: Mutex::new(None),
        }
    }

    /// The Slurm user jobs are submitted as (`X-SLURM-USER-NAME`).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The current token, fetched again when it is about to expire (or `fresh`: slurmrestd
    /// refused the last one).
    async fn token(&self, fresh: bool) -> Result<String, SlurmError> {
        let mut held = self.token.lock().await;
        if let Some(t) = held.as_ref() {
            if !fresh && t.expires > now_secs() + REFRESH_BEFORE.as_secs() {
                return Ok(t.value.clone());
            }
        }
        let text = match (&self.cfg.token_command, &self.cfg.token_file) {
            (Some(cmd), _) => {
                let argv = cmd.argv();
                let (program, args) = argv
                    .split_first()
                    .ok_or_else(|| SlurmError::Token("token_command is empty".into()))?;
                let out = tokio::time::timeout(
                    CALL_TIMEOUT,
                    tokio::process::Command::new(program)
                        .args(args)
                        .stdin(std::process::Stdio::null())
                        .kill_on_drop(true)
                        .output(),
                )
                .await
                .map_err(|_| SlurmError::Token("token_command timed out".into()))?
                .map_err(|e| SlurmError::Token(format!("token_command: {e}")))?;
                if !out.status.success() {
                    return Err(SlurmError::Token(format!(
                        "token_command exited with {}: {}",
                        out.status,
                        crew_core::redact::redact_str(String::from_utf8_lossy(&out.stderr).trim())
                    )));
                }
                String::from_utf8_lossy(&out.stdout).into_owned()
            }
            (None, Some(file)) => tokio::fs::read_to_string(file)
                .await
                .map_err(|e| SlurmError::Token(format!("{}: {e}", file.display())))?,
            (None, None) => return Err(SlurmError::Token("no token source".into())),
        };
        let value = parse_token(&text)
            .ok_or_else(|| SlurmError::Token("the token source printed no token".into()))?;
        // Without a readable expiry, a token is fetched again after a minute.
        let expires =
            jwt_expiry(&value).unwrap_or_else(|| now_secs() + 60 + REFRESH_BEFORE.as_secs());
        *held = Some(Token {
            value: value.clone(),
            expires,
        });
        Ok(value)
    }

    fn path(&self, rest: &str) -> String {
        format!("/slurm/{}/{rest}", self.api)
    }

    /// One call; a refused token is fetched again and the call repeated once.
    async fn call(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, SlurmError> {
        let mut fresh = false;
        loop {
            let token = self.token(fresh).await?;
            match self.call_once(method, path, body, &token).await {
                Err(SlurmError::Http { status: 401, .. }) if !fresh => fresh = true,
                other => return other,
            }
        }
    }

    async fn call_once(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&Value>,
        token: &str,
    ) -> Result<Value, SlurmError> {
        let connect = |e: String| SlurmError::Connect {
            addr: self.addr.clone(),
            message: e,
        };
        let work = async {
            let stream = tokio::net::TcpStream::connect(&self.addr)
                .await
                .map_err(|e| connect(e.to_string()))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| connect(e.to_string()))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            let bytes = body.map(|b| b.to_string()).unwrap_or_default();
            let req = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("host", self.addr.as_str())
                .header("x-slurm-user-name", self.user.as_str())
                .header("x-slurm-user-token", token)
                .header("content-type", "application/json")
                .header("accept", "application/json")
                .body(Full::new(Bytes::from(bytes)))
                .map_err(|e| connect(e.to_string()))?;
            let resp = sender
                .send_request(req)
                .await
                .map_err(|e| connect(e.to_string()))?;
            let status = resp.status().as_u16();
            let body = http_body_util::Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| connect(e.to_string()))?
                .to_bytes();
            Ok::<_, SlurmError>((status, body))
        };
        let (status, body) = tokio::time::timeout(CALL_TIMEOUT, work)
            .await
            .map_err(|_| connect(format!("no answer in {}s", CALL_TIMEOUT.as_secs())))??;
        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let message = errors_text(&value)
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
        if !(200..300).contains(&status) {
            return Err(SlurmError::Http {
                method,
                path: path.to_string(),
                status,
                message,
            });
        }
        Ok(value)
    }

    /// Submit; the job id.
    pub async fn submit(&self, job: &JobRequest) -> Result<u64, SlurmError> {
        let path = self.path("job/submit");
        let v = self.call("POST", &path, Some(&submit_body(job))).await?;
        v.get("job_id")
            .and_then(Value::as_u64)
            .filter(|id| *id > 0)
            .ok_or_else(|| SlurmError::Answer {
                path,
                message: errors_text(&v).unwrap_or_else(|| "no job_id in the answer".into()),
            })
    }

    /// One job; `None` when Slurm does not know it (any more).
    pub async fn job(&self, id: u64) -> Result<Option<JobInfo>, SlurmError> {
        let path = self.path(&format!("job/{id}"));
        match self.call("GET", &path, None).await {
            Ok(v) => Ok(v
                .get("jobs")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().filter_map(parse_job).find(|j| j.job_id == id))),
            // 22.05 answers an unknown id with an error 2017 ("Invalid job id specified").
            Err(SlurmError::Http { message, .. }) if message.contains("Invalid job id") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every job the controller still knows.
    pub async fn jobs(&self) -> Result<Vec<JobInfo>, SlurmError> {
        Ok(self.jobs_since(None).await?.unwrap_or_default())
    }

    /// Every job the controller knows, or `None` when no job changed since `since` (Unix
    /// seconds, the controller's clock): slurmrestd answers that with 304 and no body.
    pub async fn jobs_since(&self, since: Option<u64>) -> Result<Option<Vec<JobInfo>>, SlurmError> {
        let path = match since {
            Some(t) => format!("{}?update_time={t}", self.path("jobs")),
            None => self.path("jobs"),
        };
        let v = match self.call("GET", &path, None).await {
            Ok(v) => v,
            Err(SlurmError::Http { status: 304, .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(
            v.get("jobs")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(parse_job).collect())
                .unwrap_or_default(),
        ))
    }

    /// Cancel (Slurm sends SIGTERM, then SIGKILL after `KillWait`). A job Slurm no longer
    /// knows is cancelled already.
    pub async fn cancel(&self, id: u64) -> Result<(), SlurmError> {
        match self
            .call("DELETE", &self.path(&format!("job/{id}")), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(SlurmError::Http { message, .. }) if message.contains("Invalid job id") => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// slurmrestd's `errors` list as one line.
fn errors_text(v: &Value) -> Option<String> {
    let errs = v.get("errors")?.as_array()?;
    let parts: Vec<String> = errs
        .iter()
        .map(|e| {
            let field = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
            format!("{} ({})", field("error"), field("description"))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The submit body (v0.0.38's shape, which v0.0.40+ also read for these fields except the
/// environment: a list of `NAME=value` there, an object in v0.0.38).
pub fn submit_body(job: &JobRequest) -> Value {
    let r = &job.resources;
    let mut j = json!({
        "name": job.name,
        "comment": job.comment,
        "current_working_directory": job.cwd,
        "standard_output": job.stdout,
        "standard_error": job.stdout,
        "environment": job.env.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
        "requeue": false,
    });
    let set = |j: &mut Value, k: &str, v: Value| {
        if let Some(o) = j.as_object_mut() {
            o.insert(k.to_string(), v);
        }
    };
    if let Some(p) = &r.partition {
        set(&mut j, "partition", json!(p));
    }
    if let Some(a) = &r.account {
        set(&mut j, "account", json!(a));
    }
    if let Some(q) = &r.qos {
        set(&mut j, "qos", json!(q));
    }
    if let Some(c) = r.cpus_per_task {
        set(&mut j, "cpus_per_task", json!(c));
    }
    if let Some(m) = r.memory_mb {
        set(&mut j, "memory_per_node", json!(m));
    }
    if let Some(t) = r.time_limit_minutes {
        set(&mut j, "time_limit", json!(t));
    }
    json!({"script": job.script, "job": j})
}

/// A token from what a command printed or a file holds: the last non-empty line, without a
/// `SLURM_JWT=` prefix.
pub fn parse_token(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let t = line.strip_prefix("SLURM_JWT=").unwrap_or(line).trim();
    (!t.is_empty() && !t.contains(char::is_whitespace)).then(|| t.to_string())
}

/// The `exp` claim of a JWT (not verified: slurmrestd does that; crew only schedules a refresh).
pub fn jwt_expiry(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64url(payload)?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    v.get("exp")?.as_u64()
}

fn base64url(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_their_expiry_are_read() {
        // The token `scontrol token` printed here (exp 1796552661).
        let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjE3OTY1NTI2NjEsImlhdCI6MTc5NjU1MjA2MSwic3VuIjoicm9vdCJ9.W17oVnntNze1NVgI1cWkm-eO0OMhW1Xh5TOpjs3dZiE";
        assert_eq!(
            parse_token(&format!("SLURM_JWT={jwt}\n")).as_deref(),
            Some(jwt)
        );
        assert_eq!(
            parse_token(&format!("\n  {jwt}  \n\n")).as_deref(),
            Some(jwt)
        );
        assert_eq!(parse_token("\n\n"), None);
        assert_eq!(parse_token("two words"), None);
        assert_eq!(jwt_expiry(jwt), Some(1796552661));
        assert_eq!(jwt_expiry("not-a-jwt"), None);
    }

    /// A JWT whose payload says `exp` (header and signature are not read).
    fn jwt_expiring(exp: u64) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let payload = format!("{{\"exp\":{exp}}}");
        let mut out = String::new();
        for chunk in payload.as_bytes().chunks(3) {
            let n = chunk.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b))
                << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            }
        }
        format!("eyJhbGciOiJIUzI1NiJ9.{out}.sig")
    }

    /// A token is read again once it is within `REFRESH_BEFORE` of its expiry, not before.
    #[tokio::test]
    async fn a_token_is_fetched_again_before_it_expires() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("jwt");
        let cfg: SlurmConfig = toml::from_str(&format!(
            "url = \"http://127.0.0.1:6820\"\ntoken_file = {:?}\nstaging_dir = {:?}\n",
            file.display().to_string(),
            d.path().display().to_string()
        ))
        .unwrap();
        let client = Client::new(&cfg);
        let far = jwt_expiring(now_secs() + 3600);
        assert_eq!(jwt_expiry(&far), Some(now_secs() + 3600));
        std::fs::write(&file, &far).unwrap();
        assert_eq!(client.token(false).await.unwrap(), far);
        // Replaced on disk: a token far from its expiry is kept.
        let soon = jwt_expiring(now_secs() + REFRESH_BEFORE.as_secs() / 2);
        std::fs::write(&file, &soon).unwrap();
        assert_eq!(client.token(false).await.unwrap(), far);
        // Refused by slurmrestd: fetched again at once.
        assert_eq!(client.token(true).await.unwrap(), soon);
        // Within REFRESH_BEFORE of its expiry: fetched again on the next call.
        let next = jwt_expiring(now_secs() + 7200);
        std::fs::write(&file, &next).unwrap();
        assert_eq!(client.token(false).await.unwrap(), next);
    }

    #[test]
    fn the_submit_body_carries_resources_and_no_unset_field() {
        let job = JobRequest {
            name: "crew-r-t-1".into(),
            comment: "crew".into(),
            script: "#!/bin/sh\nexec crew-worker /s\n".into(),
            cwd: "/s".into(),
            stdout: "/s/job.out".into(),
            resources: super::super::config::SlurmResources {
                partition: Some("crew".into()),
                cpus_per_task: Some(2),
                time_limit_minutes: Some(5),
                ..Default::default()
            },
            env: vec![("PATH".into(), "/usr/bin".into())],
        };
        let b = submit_body(&job);
        assert_eq!(b["job"]["partition"], "crew");
        assert_eq!(b["job"]["cpus_per_task"], 2);
        assert_eq!(b["job"]["time_limit"], 5);
        assert_eq!(b["job"]["environment"]["PATH"], "/usr/bin");
        assert!(b["job"].get("account").is_none());
        assert!(b["job"].get("memory_per_node").is_none());
    }
}
