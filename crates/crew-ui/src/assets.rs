//! The page's files, compiled in by `build.rs` from `web/` (all ours, the graph layout
//! included): the dashboard works offline and needs no CDN.

pub struct Asset {
    pub mime: &'static str,
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// The file served as `/assets/<name>` (and `/` for `index.html`).
pub fn get(name: &str) -> Option<Asset> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, mime, bytes)| Asset { mime, bytes })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_and_its_modules_are_compiled_in() {
        for name in [
            "index.html",
            "app.js",
            "rpc.js",
            "dag.js",
            "layout.js",
            "style.css",
        ] {
            assert!(super::get(name).is_some(), "{name} missing");
        }
        assert!(super::get("../Cargo.toml").is_none());
    }
}
