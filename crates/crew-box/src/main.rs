//! `crew-box`: the init crewd starts each local attempt under (see the library).

fn main() {
    crew_box::init::main()
}
