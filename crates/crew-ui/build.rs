//! Embeds the dashboard's files: everything directly in `web/` that the page serves, plus the
//! graph layout library from `web/node_modules` when `npm ci` has put it there.

use std::fmt::Write;
use std::path::Path;

const DAGRE: &str = "node_modules/@dagrejs/dagre/dist/dagre.esm.js";

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
    println!("cargo:rerun-if-changed={}", web.display());
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir(&web) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let served = [".html", ".js", ".css", ".svg"]
                .iter()
                .any(|x| name.ends_with(x));
            if served && e.path().is_file() {
                println!("cargo:rerun-if-changed={}", e.path().display());
                files.push((name, e.path()));
            }
        }
    }
    let dagre = web.join(DAGRE);
    println!("cargo:rerun-if-changed={}", dagre.display());
    let has_dagre = dagre.is_file();
    if has_dagre {
        files.push(("dagre.esm.js".into(), dagre));
    }
    files.sort();
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
    let _ = writeln!(out, "const HAS_DAGRE: bool = {has_dagre};");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("assets.rs");
    if let Err(e) = std::fs::write(&dest, out) {
        panic!("cannot write {}: {e}", dest.display());
    }
}
