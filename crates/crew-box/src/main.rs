//! `crew-box`: the init crewd starts each local attempt under (see the library).
//!
//! No Rust `main`: std's start-up (stack-overflow guard, which reads `/proc/self/maps`, and
//! the rest of `lang_start`) costs about a third of a millisecond, and this binary runs twice
//! per boxed attempt and once per other one. It needs none of it: one thread, no recursion,
//! and arguments are read through `std::env` (glibc hands them over before `main`). SIGPIPE
//! is ignored as std would (`init::main` does it).
// Built as a test (no tests here), the harness's `main` stays.
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    crew_box::init::main()
}
