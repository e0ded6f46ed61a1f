//! Copies that move elements to other places on CUDA: a new buffer assembled from pieces (the
//! copy kernel writing into views of it), rows taken along an axis and rows added back along it
//! (the `kusari_take` and `kusari_scatter_add` built-in kernels; the scatter sums without
//! atomics, through the inverse of the index made on the host, so results are deterministic).

use super::launch::{CudaRef, launch_builtin, launch_on};
use super::memory::CudaStorage;
use crate::DType;
use crate::builtin_kernels::{COPY, SCATTER_ADD, TAKE};
use crate::cpu::CpuStorage;
use crate::error::{Error, Result};
use crate::launch_plan::{LaunchArgs, Operand};
use crate::layout::Layout;

/// A host vector of int64 on `cuda:ordinal` (at least one element, so that no argument is empty).
fn upload_i64(mut v: Vec<i64>, ordinal: usize) -> Result<(CudaStorage, Layout)> {
    if v.is_empty() {
        v.push(0);
    }
    let layout = Layout::contiguous(&[v.len()]);
    let s = CudaStorage::from_host(&CpuStorage::from_vec(v), &layout, ordinal)?;
    Ok((s, layout))
}

fn first_output(name: &str, outputs: Vec<CudaStorage>) -> Result<CudaStorage> {
    outputs
        .into_iter()
        .next()
        .ok_or_else(|| Error::KernelArguments {
            kernel: name.to_string(),
            msg: "the kernel has no output".to_string(),
        })
}

impl CudaStorage {
    /// `shape`'s elements of `fill` on `cuda:ordinal`, with each piece copied to its destination
    /// layout (into the new C-contiguous buffer, each element its own).
    pub(crate) fn assemble(
        shape: &[usize],
        dtype: DType,
        fill: f64,
        ordinal: usize,
        pieces: &[(CudaRef<'_>, &Layout)],
    ) -> Result<Self> {
        let out = CudaStorage::full(shape, fill, dtype, ordinal)?;
        for &(src, dst) in pieces {
            if dst.size() == 0 {
                continue;
            }
            let args = LaunchArgs {
                inputs: vec![Operand::Array(src)],
                params: &[],
                outputs: Some(vec![(&out, dst)]),
                size: None,
                reduce_dims: true,
                cast_params: true,
            };
            launch_on(ordinal, &COPY, &args)?;
        }
        Ok(out)
    }

    /// Rows `idx` of `l` seen as `[outer, n, inner]` (a zero row for a negative index), as the
    /// host's `take`.
    pub(crate) fn take(
        &self,
        l: &Layout,
        idx: &[i64],
        (outer, n, inner): (usize, usize, usize),
    ) -> Result<Self> {
        let ordinal = self.ordinal();
        let size = outer * idx.len() * inner;
        if size == 0 || l.size() == 0 {
            return CudaStorage::full(&[size], 0.0, self.dtype(), ordinal);
        }
        let (ids, il) = upload_i64(idx.to_vec(), ordinal)?;
        let params = [n as f64, idx.len() as f64, inner as f64];
        let (outputs, _) = launch_builtin(
            ordinal,
            &TAKE,
            &[(self, l), (&ids, &il)],
            &params,
            Some(size),
        )?;
        first_output(TAKE.name, outputs)
    }

    /// The adjoint of [`take`](Self::take), as the host's `scatter_add` (the same order of
    /// additions).
    pub(crate) fn scatter_add(
        &self,
        l: &Layout,
        idx: &[i64],
        n_out: usize,
        (outer, inner): (usize, usize),
    ) -> Result<Self> {
        let ordinal = self.ordinal();
        let size = outer * n_out * inner;
        if size == 0 || l.size() == 0 {
            return CudaStorage::full(&[size], 0.0, self.dtype(), ordinal);
        }
        // The inverse of the index: for each output row, the source rows going there, in order.
        let mut starts = vec![0i64; n_out + 1];
        for &r in idx.iter().filter(|&&r| r >= 0) {
            starts[r as usize + 1] += 1;
        }
        for r in 0..n_out {
            starts[r + 1] += starts[r];
        }
        let mut next: Vec<i64> = starts[..n_out].to_vec();
        let mut order = vec![0i64; starts[n_out] as usize];
        for (j, &r) in idx.iter().enumerate().filter(|&(_, &r)| r >= 0) {
            order[next[r as usize] as usize] = j as i64;
            next[r as usize] += 1;
        }
        let (starts, sl) = upload_i64(starts, ordinal)?;
        let (order, ol) = upload_i64(order, ordinal)?;
        let params = [n_out as f64, idx.len() as f64, inner as f64];
        let (outputs, _) = launch_builtin(
            ordinal,
            &SCATTER_ADD,
            &[(self, l), (&starts, &sl), (&order, &ol)],
            &params,
            Some(size),
        )?;
        first_output(SCATTER_ADD.name, outputs)
    }
}
