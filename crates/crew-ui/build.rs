//! Embeds the dashboard's files: everything directly in `web/` that the page serves. The page
//! is all ours (its graph layout too, `web/layout.js`), so a build needs no `npm ci`, and cargo
//! reruns this script only when one of these files, or the directory's list of files, changes.

use std::fmt::Write;
use std::path::Path;

fn mime(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

fn main() {
    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(&web) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let served = [".html", ".js", ".css", ".svg"]
                .iter()
                .any(|x| name.ends_with(x));
            if served && e.path().is_file() {
                files.push((name, e.path()));
            }
        }
    }
    files.sort();
    // Every path named here exists: cargo reruns a build script forever for a path that does
    // not. The directory itself catches a file added or removed (cargo compares the newest
    // mtime under it, so nothing else may be written there by a build).
    println!("cargo:rerun-if-changed={}", web.display());
    for (_, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let mut out = String::from("pub static ASSETS: &[(&str, &str, &[u8])] = &[\n");
    for (name, path) in &files {
        let _ = writeln!(
            out,
            "    ({name:?}, {:?}, include_bytes!({:?})),",
            mime(name),
            path.display().to_string()
        );
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("assets.rs");
    if let Err(e) = std::fs::write(&dest, out) {
        panic!("cannot write {}: {e}", dest.display());
    }
}
