//! The repository read as text: the shape of `src/` (dependencies point
//! one way), the docs holding together, and the load tool's functions kept
//! short.

mod architecture;
mod docs;
mod function_length;
