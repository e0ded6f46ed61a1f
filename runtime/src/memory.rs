//! Host memory: the cache of large buffers that arrays reuse.
//!
//! When an array of at least 64 KiB is dropped its buffer is kept (up to a cap, 1 GiB by default)
//! and handed to the next array of the same dtype and length. A training loop therefore stops
//! paying for fresh pages after its first step: on virtual machines the kernel's page faults cost
//! more than the arithmetic of an elementwise op over the same memory. The cache is CuPy's memory
//! pool applied to host memory; these functions inspect and bound it. It holds no more buffers of
//! one dtype and length than the arrays of that dtype and length it has had out at once, so that
//! arrays made from a program's own vectors (a batch of input data each step) do not pile up.
//!
//! ```
//! use kusari::{memory, Array, DType};
//! let a = Array::zeros(&[1024, 1024], DType::F32).unwrap(); // 4 MiB
//! let b = (&a + 1.0).unwrap();
//! drop(b);
//! assert!(memory::cached_bytes() >= 4 << 20);
//! memory::free_cached();
//! assert_eq!(memory::cached_bytes(), 0);
//! ```

pub use crate::cpu::pool::{cached_bytes, free_cached, set_cache_limit};
