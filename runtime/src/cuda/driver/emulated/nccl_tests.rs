//! The NCCL stand-in at the seam: its results against hand-derived values, and each of NCCL's
//! rules it enforces, broken on purpose, failing on every rank with a message that names it.

use half::f16;

use super::memory;
use super::nccl::{Member, unique_id};
use crate::cuda::driver::nccl_types::{Collective, NcclType, P2p, ReduceOp};
use crate::cuda::driver::types::DevicePtr;

/// Device memory holding `bytes`.
struct Buf {
    ptr: DevicePtr,
}

impl Buf {
    fn new(ordinal: usize, bytes: &[u8]) -> Buf {
        let ptr = memory::alloc(ordinal, bytes.len()).unwrap();
        // SAFETY: the allocation holds `bytes.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr as *mut u8, bytes.len()) };
        Buf { ptr }
    }

    fn f32s(ordinal: usize, v: &[f32]) -> Buf {
        Buf::new(
            ordinal,
            &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
        )
    }

    fn read(&self, bytes: usize) -> Vec<u8> {
        // SAFETY: the tests read no more than they allocated.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, bytes) }.to_vec()
    }

    fn read_f32(&self, n: usize) -> Vec<f32> {
        self.read(n * 4)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        memory::free(self.ptr);
    }
}

/// Runs `f(rank, member)` on `devices.len()` ranks, rank `r` on emulated device `devices[r]`,
/// each a thread; returns each rank's result.
fn ranks<T: Send>(devices: &[usize], f: impl Fn(usize, &Member) -> T + Sync) -> Vec<T> {
    let id = unique_id();
    let n = devices.len();
    std::thread::scope(|s| {
        let handles: Vec<_> = devices
            .iter()
            .enumerate()
            .map(|(rank, &ordinal)| {
                let f = &f;
                s.spawn(move || {
                    let m = Member::join(ordinal, n, rank, &id).unwrap();
                    f(rank, &m)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn all_reduce(
    m: &Member,
    send: DevicePtr,
    recv: DevicePtr,
    count: usize,
    ty: NcclType,
    op: ReduceOp,
) -> Result<(), String> {
    // SAFETY: the tests' buffers hold `count` elements.
    unsafe {
        m.collective(&Collective::AllReduce {
            send,
            recv,
            count,
            ty,
            op,
        })
    }
}

#[test]
fn all_reduce_sums_in_rank_order_in_place_or_not() {
    let got = ranks(&[0, 1, 2], |rank, m| {
        let x = Buf::f32s(rank, &[rank as f32, 1.0, -2.5 * rank as f32]);
        // Rank 0 reduces in place, the others into a buffer of their own.
        let out = (rank != 0).then(|| Buf::f32s(rank, &[9.0; 3]));
        let recv = out.as_ref().map_or(x.ptr, |o| o.ptr);
        all_reduce(m, x.ptr, recv, 3, NcclType::F32, ReduceOp::Sum).unwrap();
        out.as_ref().unwrap_or(&x).read_f32(3)
    });
    for g in got {
        assert_eq!(g, vec![3.0, 3.0, -7.5]);
    }
}

#[test]
fn reductions_of_every_kind() {
    let cases: [(ReduceOp, [f32; 2], f32); 4] = [
        (ReduceOp::Prod, [3.0, -4.0], -12.0),
        (ReduceOp::Max, [3.0, -4.0], 3.0),
        (ReduceOp::Min, [3.0, -4.0], -4.0),
        (ReduceOp::Avg, [3.0, 5.0], 4.0),
    ];
    for (op, values, want) in cases {
        let got = ranks(&[0, 1], |rank, m| {
            let x = Buf::f32s(rank, &[values[rank]]);
            all_reduce(m, x.ptr, x.ptr, 1, NcclType::F32, op).unwrap();
            x.read_f32(1)[0]
        });
        assert_eq!(got, vec![want, want], "{op:?}");
    }
    // Integers: the mean is the sum divided, rounded toward zero; sums wrap.
    let int = |v: i32| v.to_le_bytes().to_vec();
    let got = ranks(&[0, 1], |rank, m| {
        let x = Buf::new(rank, &int([3, 4][rank]));
        all_reduce(m, x.ptr, x.ptr, 1, NcclType::I32, ReduceOp::Avg).unwrap();
        let y = Buf::new(rank, &int([i32::MAX, 1][rank]));
        all_reduce(m, y.ptr, y.ptr, 1, NcclType::I32, ReduceOp::Sum).unwrap();
        let read = |b: &Buf| i32::from_le_bytes(b.read(4).try_into().unwrap());
        (read(&x), read(&y))
    });
    assert_eq!(got, vec![(3, i32::MIN); 2]);
}

#[test]
fn float16_mean_scales_before_summing_so_it_does_not_overflow() {
    let max = f16::MAX;
    let bytes = |v: f16| v.to_le_bytes().to_vec();
    let got = ranks(&[0, 1], |rank, m| {
        let x = Buf::new(rank, &bytes(max));
        let sum = Buf::new(rank, &[0; 2]);
        all_reduce(m, x.ptr, sum.ptr, 1, NcclType::F16, ReduceOp::Sum).unwrap();
        all_reduce(m, x.ptr, x.ptr, 1, NcclType::F16, ReduceOp::Avg).unwrap();
        let read = |b: &Buf| f16::from_le_bytes(b.read(2).try_into().unwrap());
        (read(&sum), read(&x))
    });
    for (sum, mean) in got {
        assert!(sum.is_infinite(), "65504 + 65504 overflows float16: {sum}");
        assert_eq!(mean, max);
    }
}

#[test]
fn broadcast_and_in_place_all_gather() {
    let got = ranks(&[0, 1, 2], |rank, m| {
        let x = Buf::f32s(rank, &[rank as f32 * 10.0, 1.0]);
        let out = Buf::f32s(rank, &[0.0; 2]);
        // SAFETY: both buffers hold two floats.
        unsafe {
            m.collective(&Collective::Broadcast {
                send: x.ptr,
                recv: out.ptr,
                count: 2,
                ty: NcclType::F32,
                root: 2,
            })
        }
        .unwrap();
        // In place: each rank's part already at its slot of the receive buffer.
        let all = Buf::f32s(rank, &[-1.0; 6]);
        let mine = all.ptr + (rank * 8) as u64;
        // SAFETY: the slot lies in `all`.
        unsafe {
            std::ptr::copy_nonoverlapping(x.ptr as *const u8, mine as *mut u8, 8);
            m.collective(&Collective::AllGather {
                send: mine,
                recv: all.ptr,
                count: 2,
                ty: NcclType::F32,
            })
        }
        .unwrap();
        (out.read_f32(2), all.read_f32(6))
    });
    for (b, g) in got {
        assert_eq!(b, vec![20.0, 1.0]);
        assert_eq!(g, vec![0.0, 1.0, 10.0, 1.0, 20.0, 1.0]);
    }
}

#[test]
fn grouped_sends_and_receives_swap_buffers() {
    let got = ranks(&[0, 1], |rank, m| {
        let mine = Buf::f32s(rank, &[rank as f32 + 1.0; 4]);
        let theirs = Buf::f32s(rank, &[0.0; 4]);
        let peer = 1 - rank;
        // SAFETY: both buffers hold four floats.
        unsafe {
            m.group(&[
                P2p::Send {
                    buf: mine.ptr,
                    count: 4,
                    ty: NcclType::F32,
                    peer,
                },
                P2p::Recv {
                    buf: theirs.ptr,
                    count: 4,
                    ty: NcclType::F32,
                    peer,
                },
            ])
        }
        .unwrap();
        theirs.read_f32(4)
    });
    assert_eq!(got, vec![vec![2.0; 4], vec![1.0; 4]]);
}

#[test]
fn two_ranks_sending_to_each_other_outside_a_group_is_the_hang_it_would_be() {
    let got = ranks(&[0, 1], |rank, m| {
        let mine = Buf::f32s(rank, &[1.0; 4]);
        let send = P2p::Send {
            buf: mine.ptr,
            count: 4,
            ty: NcclType::F32,
            peer: 1 - rank,
        };
        // SAFETY: the buffer holds four floats.
        let first = unsafe { m.group(&[send]) };
        // The communicator stays broken.
        // SAFETY: as above.
        let later = unsafe { m.group(&[send]) };
        (first.unwrap_err(), later.unwrap_err())
    });
    for (first, later) in got {
        assert!(
            first.contains("every rank waits and none can go on"),
            "{first}"
        );
        assert!(
            first.contains("rank 0 in ncclSend(4 ncclFloat32 to rank 1) outside a group")
                && first.contains("rank 1 in ncclSend(4 ncclFloat32 to rank 0) outside a group")
                && first.contains("ncclGroupStart"),
            "{first}"
        );
        assert_eq!(later, first);
    }
}

#[test]
fn different_collectives_fail_on_every_rank_naming_both() {
    let got = ranks(&[0, 1], |rank, m| {
        let count = 4 + rank;
        let x = Buf::f32s(rank, &vec![1.0; count]);
        all_reduce(m, x.ptr, x.ptr, count, NcclType::F32, ReduceOp::Sum).unwrap_err()
    });
    for e in got {
        assert!(
            e.contains("rank 0 calls ncclAllReduce(4 ncclFloat32, ncclSum)")
                && e.contains("rank 1 calls ncclAllReduce(5 ncclFloat32, ncclSum)"),
            "{e}"
        );
    }
    // A collective against a transfer: every rank waits, none can go on.
    let got = ranks(&[0, 1], |rank, m| {
        let x = Buf::f32s(rank, &[1.0]);
        if rank == 0 {
            all_reduce(m, x.ptr, x.ptr, 1, NcclType::F32, ReduceOp::Sum).unwrap_err()
        } else {
            // SAFETY: the buffer holds one float.
            unsafe {
                m.group(&[P2p::Recv {
                    buf: x.ptr,
                    count: 1,
                    ty: NcclType::F32,
                    peer: 0,
                }])
            }
            .unwrap_err()
        }
    });
    for e in got {
        assert!(
            e.contains("rank 0 in ncclAllReduce(1 ncclFloat32, ncclSum)"),
            "{e}"
        );
        assert!(
            e.contains("rank 1 in ncclRecv(1 ncclFloat32 from rank 0)"),
            "{e}"
        );
    }
}

#[test]
fn a_send_and_a_receive_of_different_sizes_fail() {
    let got = ranks(&[0, 1], |rank, m| {
        let x = Buf::f32s(rank, &[1.0; 3]);
        let op = if rank == 0 {
            P2p::Send {
                buf: x.ptr,
                count: 3,
                ty: NcclType::F32,
                peer: 1,
            }
        } else {
            P2p::Recv {
                buf: x.ptr,
                count: 2,
                ty: NcclType::F32,
                peer: 0,
            }
        };
        // SAFETY: the buffer holds three floats.
        unsafe { m.group(&[op]) }.unwrap_err()
    });
    for e in got {
        assert!(
            e.contains("rank 0 sends 3 ncclFloat32 to rank 1, which receives 2 ncclFloat32"),
            "{e}"
        );
    }
}

#[test]
fn two_ranks_on_one_device_are_refused_on_both() {
    let id = unique_id();
    let errs: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|rank| s.spawn(move || Member::join(0, 2, rank, &id).map(|_| ()).unwrap_err()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for e in errs {
        assert!(
            e.contains("ranks 0 and 1 of one communicator are both on cuda:0")
                || e.contains("ranks 1 and 0 of one communicator are both on cuda:0"),
            "{e}"
        );
    }
}

#[test]
fn bad_buffers_fail_on_every_rank() {
    // Overlapping without being in place.
    let got = ranks(&[0, 1], |rank, m| {
        let x = Buf::f32s(rank, &[1.0; 5]);
        all_reduce(m, x.ptr, x.ptr + 4, 4, NcclType::F32, ReduceOp::Sum).unwrap_err()
    });
    for e in &got {
        assert!(
            e.contains("overlaps recvbuff") && e.contains("without being in place"),
            "{e}"
        );
    }
    // A host pointer; another device's memory; a buffer too small.
    let host = [0f32; 4];
    let host_ptr = host.as_ptr() as DevicePtr;
    let got = ranks(&[0, 1], |rank, m| {
        let x = Buf::f32s(1 - rank, &[1.0; 4]);
        let small = Buf::f32s(rank, &[1.0; 2]);
        let (send, recv, want) = match rank {
            0 => (host_ptr, small.ptr, "not memory of any emulated device"),
            _ => (x.ptr, x.ptr, "is memory of cuda:0, not of cuda:1"),
        };
        let e = all_reduce(m, send, recv, 4, NcclType::F32, ReduceOp::Sum).unwrap_err();
        (e, want)
    });
    // Whichever rank posted first broke the communicator for both.
    let first = &got[0].0;
    assert!(got.iter().all(|(e, _)| e == first), "{got:?}");
    assert!(got.iter().any(|(e, want)| e.contains(want)), "{got:?}");
    let got = ranks(&[0, 1], |rank, m| {
        let small = Buf::f32s(rank, &[1.0; 2]);
        all_reduce(m, small.ptr, small.ptr, 4, NcclType::F32, ReduceOp::Sum).unwrap_err()
    });
    assert!(got[0].contains("overrun its allocation"), "{}", got[0]);
}
