//! Buffers that cannot be had are `Err(OutOfMemory)` naming the op and the bytes, not an abort:
//! larger than the machine, or larger than what a process memory limit leaves.

use kusari::{Array, DType, Device, Error};

fn assert_oom(r: kusari::Result<Array>, op: &str, bytes: usize) {
    match r {
        Err(Error::OutOfMemory {
            op: got,
            device: Device::Cpu,
            bytes: b,
        }) => assert_eq!((got.as_str(), b), (op, bytes)),
        other => panic!("{op}: expected OutOfMemory of {bytes} bytes, got {other:?}"),
    }
}

#[test]
fn buffers_larger_than_the_machine_are_errors() {
    // 1 TiB: no test machine has that much memory and swap.
    assert_oom(Array::zeros(&[1 << 38], DType::F32), "zeros", 1 << 40);
    assert_oom(Array::full(&[1 << 37], 1.0, DType::F64), "full", 1 << 40);
    assert_oom(
        Array::arange(0.0, 1e12, 1.0, DType::F64),
        "arange",
        8_000_000_000_000,
    );
    let msg = Array::zeros(&[1 << 38], DType::F32)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("zeros") && msg.contains("1099511627776 bytes") && msg.contains("1.0 TiB"),
        "{msg}"
    );
}

#[test]
fn an_output_that_does_not_fit_is_an_error_and_the_input_survives() {
    // A broadcast view of 2^38 elements costs nothing; computing on it needs 1 TiB.
    let view = Array::ones(&[1], DType::F32)
        .unwrap()
        .broadcast_to(&[1 << 38])
        .unwrap();
    assert_oom(&view + 1.0, "add", 1 << 40);
    assert_oom(view.contiguous(), "contiguous", 1 << 40);
    assert_oom(view.astype(DType::F64), "astype", 1 << 41);
    assert_eq!(view.shape(), &[1 << 38]);
}

/// Under a process memory limit (`ulimit -v`) that holds the input but not a second copy,
/// `&a + 1.0` is an error: the allocation is refused by the allocator, not foreseen.
#[test]
fn an_allocation_refused_under_a_memory_limit_is_an_error() {
    super::run_child(
        "allocation::child_add_under_memory_limit",
        Some(1 << 20), // KiB: a 1 GiB address-space limit
    );
}

#[test]
#[ignore = "run by an_allocation_refused_under_a_memory_limit_is_an_error in a limited child"]
fn child_add_under_memory_limit() {
    // 600 MiB of float32 fits under the 1 GiB limit; a second 600 MiB does not.
    let n = 600 << 18;
    let a = Array::zeros(&[n], DType::F32).unwrap();
    match &a + 1.0 {
        Err(Error::OutOfMemory { op, bytes, .. }) => {
            assert_eq!((op.as_str(), bytes), ("add", n * 4));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    // The failed op left `a` intact and usable.
    assert_eq!(
        a.slice_axis(0, 0, 3, 1).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0; 3]
    );
}

/// `Array::to_vec` copies into a buffer it allocates fallibly: under a limit that holds the array
/// but not its copy, an error, not an abort.
#[test]
fn to_vec_refused_under_a_memory_limit_is_an_error() {
    super::run_child("allocation::child_to_vec_under_memory_limit", Some(1 << 20));
}

#[test]
#[ignore = "run by to_vec_refused_under_a_memory_limit_is_an_error in a limited child"]
fn child_to_vec_under_memory_limit() {
    let n = 600 << 18;
    let a = Array::zeros(&[n], DType::F32).unwrap();
    match a.to_vec::<f32>() {
        Err(Error::OutOfMemory { op, bytes, .. }) => {
            assert_eq!((op.as_str(), bytes), ("to_vec", n * 4));
        }
        other => panic!("expected OutOfMemory, got {:?}", other.map(|v| v.len())),
    }
}

/// The matrix-multiply engine allocates its packing buffers itself, and aborts if refused;
/// kusari checks first. With the address space filled to the last mebibyte, a product whose
/// result fits (256 bytes) but whose workspace does not is an error, not an abort (it was an
/// abort: "memory allocation of 1114112 bytes failed"). Once the filler is dropped (into the
/// buffer cache, which a refused allocation empties) the same product succeeds.
#[test]
fn a_matmul_whose_workspace_does_not_fit_is_an_error() {
    super::run_child("allocation::child_matmul_under_memory_limit", Some(1 << 20));
}

#[test]
#[ignore = "run by a_matmul_whose_workspace_does_not_fit_is_an_error in a limited child"]
fn child_matmul_under_memory_limit() {
    let k = 1 << 16;
    let a = Array::ones(&[8, k], DType::F32).unwrap();
    let b = Array::ones(&[k, 8], DType::F32).unwrap();
    // Start the thread pool and the engine's per-thread buffers while there is room.
    a.matmul(&b).unwrap();
    // Fill the address space a mebibyte at a time until the allocator refuses (how much that
    // takes depends on the machine: each thread's malloc arena reserves address space too).
    let mut filler = Vec::new();
    while let Ok(block) = Array::zeros(&[1 << 18], DType::F32) {
        filler.push(block);
    }
    println!("filled {} MiB", filler.len());
    match a.matmul(&b) {
        Err(Error::OutOfMemory { op, .. }) => assert_eq!(op, "matmul"),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    drop(filler);
    let c = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(c, vec![k as f32; 64]);
}

/// rayon starts its global pool with `RAYON_NUM_THREADS` threads, else one per CPU, and panics
/// for good if one cannot start: on a 16-CPU machine under a 1 GiB address-space limit the
/// first matrix product panicked with "The global thread pool has not been initialized". kusari
/// starts the pool itself with as many threads as start. Here 1000 threads' stacks (2 MiB each)
/// cannot fit under 1 GiB, as 16 did not there.
#[test]
fn more_threads_than_the_address_space_holds_is_not_a_panic() {
    super::run_child_with(
        "allocation::child_many_threads_under_memory_limit",
        Some(1 << 20), // KiB: a 1 GiB address-space limit
        |cmd| {
            cmd.env("RAYON_NUM_THREADS", "1000");
        },
    );
}

#[test]
#[ignore = "run by more_threads_than_the_address_space_holds_is_not_a_panic in a limited child"]
fn child_many_threads_under_memory_limit() {
    // Work split across threads: a sum, an elementwise product; then a matrix product small
    // enough to run on one thread, which reserves one thread's workspace (a threaded one
    // reserves every thread's, which may rightly be refused here: the threads that did start
    // hold much of the 1 GiB).
    let n = 1 << 20;
    let x = Array::ones(&[n], DType::F32).unwrap();
    assert_eq!(x.sum().unwrap().to_vec::<f32>().unwrap(), vec![n as f32]);
    let y = x.mul(&x).unwrap().to_vec::<f32>().unwrap();
    assert!(y.len() == n && y.iter().all(|&v| v == 1.0));
    let a = Array::ones(&[16, 32], DType::F32).unwrap();
    let b = Array::ones(&[32, 16], DType::F32).unwrap();
    let c = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
    assert!(c.len() == 256 && c.iter().all(|&v| v == 32.0));
}
