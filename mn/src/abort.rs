//! [`run_or_abort`]: a rank that fails ends the whole job, instead of leaving the others
//! waiting in a collective it will never call.

use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::communicator::Communicator;

/// Runs `f`; if it returns an error or panics, prints `kusari-mn: rank R of N failed: ...` to
/// standard error and aborts the job with code 1 ([`Communicator::abort`]: `MPI_Abort` under
/// MPI, so `mpirun` stops every rank and exits with an error).
///
/// Use it around the body of a program started with `mpirun`:
///
/// ```no_run
/// # fn train(_: &kusari_mn::Communicator) -> kusari_mn::Result<()> { Ok(()) }
/// let comm = kusari_mn::Communicator::single();
/// kusari_mn::run_or_abort(&comm, || train(&comm));
/// ```
pub fn run_or_abort<T, E: Display>(comm: &Communicator, f: impl FnOnce() -> Result<T, E>) -> T {
    let failure = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e.to_string(),
        Err(panic) => format!("panicked: {}", panic_message(panic.as_ref())),
    };
    eprintln!(
        "kusari-mn: rank {} of {} failed: {failure}; aborting the job",
        comm.rank(),
        comm.size()
    );
    comm.abort(1)
}

/// The message a panic carried (`panic!`'s formatted string or literal).
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}
