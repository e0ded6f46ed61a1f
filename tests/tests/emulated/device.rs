//! The emulated CUDA device tested itself, through kusari's public API: every test asks for two
//! emulated devices first (`cuda::emulate(2)`), so this file runs on any machine, GPU or not.
//!
//! A kernel's memory mistakes must fail loudly: one element written past an output crashes the
//! process (tested in a child process), an output the kernel forgets to write shows up (NaN,
//! -1, or an error for bool), and memory of one device is not memory of another.

use kusari::prelude::*;
use kusari::{ElementwiseKernel, cuda};

use super::emulated;

#[test]
fn the_device_says_it_is_emulated_and_has_an_h100s_shape() {
    if !emulated("the_device_says_it_is_emulated_and_has_an_h100s_shape") {
        return;
    }
    assert!(cuda::is_emulated());
    assert_eq!(cuda::device_count(), 2);
    assert!(cuda::is_available());
    let p = cuda::device_properties(1).unwrap();
    assert!(p.emulated);
    assert!(p.name.contains("emulated"), "{}", p.name);
    assert_eq!(p.compute_capability, (9, 0));
    assert_eq!(p.sm_count, 132);
    let (name, cc) = cuda::properties(0).unwrap();
    assert!(name.contains("emulated") && cc == (9, 0));
    let e = cuda::device_properties(2).unwrap_err().to_string();
    assert!(
        e.contains("cuda:2 does not exist") && e.contains("2 CUDA device(s)"),
        "{e}"
    );
    // The process has chosen: no other driver or device count may be asked for now.
    assert!(cuda::emulate(3).is_err());
}

static WRITE_PAST_END: ElementwiseKernel =
    ElementwiseKernel::new("write_past_end", "T x", "raw T y", "", "y[i + 1] = x;");

#[test]
fn a_kernel_writing_one_element_past_its_output_is_an_error_naming_the_memory() {
    if !emulated("a_kernel_writing_one_element_past_its_output_is_an_error_naming_the_memory") {
        return;
    }
    let x = Array::ones(&[1000], DType::F32)
        .unwrap()
        .to_device(Device::Cuda(0))
        .unwrap();
    // The write lands on the guard page after the output: the fault is the launch's error.
    let e = WRITE_PAST_END.launch(&[&x], &[]).unwrap_err().to_string();
    assert!(e.contains("kernel write_past_end__contiguous_"), "{e}");
    assert!(e.contains("SIGSEGV"), "{e}");
    assert!(
        e.contains("byte 4000 of the allocation of 4000 bytes") && e.contains("1 past its end"),
        "{e}"
    );
    // The faulting thread: the one whose `i + 1` is 1000.
    assert!(e.contains("thread (231, 0, 0) of block (3, 0, 0)"), "{e}");
}

#[test]
fn writes_inside_the_output_pass_the_same_kernel_shape() {
    if !emulated("writes_inside_the_output_pass_the_same_kernel_shape") {
        return;
    }
    // The crashing kernel's twin, writing inside its output: it runs, and shifts x by one.
    static SHIFT: ElementwiseKernel = ElementwiseKernel::new(
        "write_shifted",
        "T x",
        "raw T y",
        "",
        "if (i + 1 < n) y[i + 1] = x; else y[0] = x;",
    );
    let x = Array::from_vec((0..1000).map(|v| v as f32).collect::<Vec<_>>(), &[1000])
        .unwrap()
        .to_device(Device::Cuda(0))
        .unwrap();
    let y = SHIFT.launch(&[&x], &[]).unwrap().remove(0);
    let y = y.to_vec::<f32>().unwrap();
    assert_eq!(y[0], 999.0);
    assert!((1..1000).all(|i| y[i] == (i - 1) as f32));
}

static EVEN_ONLY: ElementwiseKernel =
    ElementwiseKernel::new("even_only", "T x", "T y", "", "if (i % 2 == 0) y = x;");

#[test]
fn an_output_the_kernel_does_not_write_is_caught() {
    if !emulated("an_output_the_kernel_does_not_write_is_caught") {
        return;
    }
    let gpu = Device::Cuda(0);
    let x = Array::from_vec(vec![1.5f32, 2.5, 3.5, 4.5], &[4])
        .unwrap()
        .to_device(gpu)
        .unwrap();
    let y = EVEN_ONLY.launch(&[&x], &[]).unwrap().remove(0);
    let y = y.to_vec::<f32>().unwrap();
    assert_eq!((y[0], y[2]), (1.5, 3.5));
    assert!(y[1].is_nan() && y[3].is_nan(), "unwritten float32: {y:?}");

    let x = Array::from_vec(vec![7i32, 8, 9], &[3])
        .unwrap()
        .to_device(gpu)
        .unwrap();
    let y = EVEN_ONLY.launch(&[&x], &[]).unwrap().remove(0);
    assert_eq!(y.to_vec::<i32>().unwrap(), [7, -1, 9]);

    let x = Array::from_vec(vec![1.0f64, 2.0], &[2])
        .unwrap()
        .to_device(gpu)
        .unwrap();
    let y = EVEN_ONLY.launch(&[&x], &[]).unwrap().remove(0);
    assert!(y.to_vec::<f64>().unwrap()[1].is_nan());

    // A bool that no kernel wrote is no bool: copying it back is an error, not undefined
    // behaviour.
    let x = Array::from_vec(vec![true, true, false], &[3])
        .unwrap()
        .to_device(gpu)
        .unwrap();
    let y = EVEN_ONLY.launch(&[&x], &[]).unwrap().remove(0);
    let e = y.to_vec::<bool>().unwrap_err().to_string();
    assert!(e.contains("element 1") && e.contains("not a bool"), "{e}");
}

#[test]
fn block_reductions_with_shared_memory_and_barriers_are_right() {
    if !emulated("block_reductions_with_shared_memory_and_barriers_are_right") {
        return;
    }
    // 1000 rows: one 256-thread block each, a shared-memory tree between __syncthreads.
    let (rows, len) = (1000usize, 777usize);
    let v: Vec<f64> = (0..rows * len)
        .map(|k| ((k * 7919) % 1013) as f64 - 506.0)
        .collect();
    let x = Array::from_vec(v.clone(), &[rows, len]).unwrap();
    let s = x.to_device(Device::Cuda(0)).unwrap().sum_axes(&[1], false);
    let s = s.unwrap().to_vec::<f64>().unwrap();
    for (r, got) in s.iter().enumerate() {
        let want: f64 = v[r * len..(r + 1) * len].iter().sum();
        assert_eq!(*got, want, "row {r}");
    }
}

#[test]
fn arrays_move_between_emulated_devices_and_mixing_them_is_an_error() {
    if !emulated("arrays_move_between_emulated_devices_and_mixing_them_is_an_error") {
        return;
    }
    let x = Array::from_vec(vec![1.0f32, -2.0, 3.5, 0.25, 9.0, -7.5], &[2, 3]).unwrap();
    let on0 = x.to_device(Device::Cuda(0)).unwrap();
    // A transposed view on cuda:0 copied to cuda:1 device to device.
    let t1 = on0
        .transpose(None)
        .unwrap()
        .to_device(Device::Cuda(1))
        .unwrap();
    assert_eq!(t1.device(), Device::Cuda(1));
    assert_eq!(t1.shape(), &[3, 2]);
    assert_eq!(
        t1.to_vec::<f32>().unwrap(),
        x.transpose(None).unwrap().to_vec::<f32>().unwrap()
    );
    let on1 = x.to_device(Device::Cuda(1)).unwrap();
    let e = (&on0 + &on1).unwrap_err();
    assert!(matches!(e, Error::DeviceMismatch { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("cuda:0") && msg.contains("cuda:1"), "{msg}");
    // Work on cuda:1 runs there.
    let y = (&on1 * 2.0).unwrap();
    assert_eq!(y.device(), Device::Cuda(1));
    assert_eq!(
        y.to_vec::<f32>().unwrap(),
        [2.0f32, -4.0, 7.0, 0.5, 18.0, -15.0]
    );
}

#[test]
fn an_allocation_the_device_cannot_hold_is_an_error() {
    if !emulated("an_allocation_the_device_cannot_hold_is_an_error") {
        return;
    }
    let e = Array::zeros_on(&[1 << 45], DType::F32, Device::Cuda(0)).unwrap_err();
    // The same error as the host's out of memory, naming the device and the bytes.
    assert!(
        matches!(
            e,
            kusari::Error::OutOfMemory {
                device: Device::Cuda(0),
                bytes,
                ..
            } if bytes == 1 << 47
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(msg.contains("out of memory on cuda:0"), "{msg}");
    // A size whose byte count overflows is an error too, not a wrap-around.
    let e = Array::zeros_on(&[usize::MAX / 2, 3], DType::F64, Device::Cuda(1)).unwrap_err();
    assert!(e.to_string().contains("overflow"), "{e}");
}

#[test]
fn freed_memory_is_given_back() {
    if !emulated("freed_memory_is_given_back") {
        return;
    }
    // Other tests allocate concurrently, but none holds more than a few tens of megabytes.
    let a = Array::zeros_on(&[1 << 24], DType::F64, Device::Cuda(0)).unwrap();
    assert!(cuda::emulated_bytes_in_use() >= 128 << 20);
    drop(a);
    assert!(cuda::emulated_bytes_in_use() < 128 << 20);
}

/// The half types' host forms (the source's `#ifndef __CUDA_ARCH__` branch) convert exactly as
/// the `half` crate does on the host: every float16 bit pattern to float32, and float32 values
/// around every float16 rounding boundary (ties to even, subnormals, overflow) back.
#[test]
fn half_conversions_on_the_emulated_device_are_bit_exact() {
    if !emulated("half_conversions_on_the_emulated_device_are_bit_exact") {
        return;
    }
    let gpu = Device::Cuda(0);
    let all: Vec<half::f16> = (0..=u16::MAX).map(half::f16::from_bits).collect();
    let on = Array::from_vec(all.clone(), &[all.len()])
        .unwrap()
        .to_device(gpu)
        .unwrap();
    let wide = on.astype(DType::F32).unwrap().to_vec::<f32>().unwrap();
    for (h, w) in all.iter().zip(&wide) {
        let want = h.to_f32();
        assert!(
            want.to_bits() == w.to_bits() || (want.is_nan() && w.is_nan()),
            "float16 {:#06x}: {w} on the device, {want} on the host",
            h.to_bits()
        );
    }
    // Every float16 value, the midpoints between neighbours (ties), and the floats just beside
    // those midpoints.
    let mut probes: Vec<f32> = Vec::new();
    for bits in 0..0x7c00u16 {
        let (a, b) = (
            half::f16::from_bits(bits).to_f64(),
            half::f16::from_bits(bits + 1).to_f64(),
        );
        let mid = ((a + b) / 2.0) as f32;
        for v in [
            a as f32,
            mid,
            f32::from_bits(mid.to_bits() - 1),
            f32::from_bits(mid.to_bits() + 1),
        ] {
            probes.push(v);
            probes.push(-v);
        }
    }
    probes.extend([
        65520.0f32,
        1e9,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e-10,
        3e-8,
    ]);
    let narrow = Array::from_vec(probes.clone(), &[probes.len()])
        .unwrap()
        .to_device(gpu)
        .unwrap()
        .astype(DType::F16)
        .unwrap()
        .to_vec::<half::f16>()
        .unwrap();
    for (v, got) in probes.iter().zip(&narrow) {
        let want = half::f16::from_f32(*v);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "float32 {v:e} ({:#010x}) to float16",
            v.to_bits()
        );
    }
    let nan = Array::from_vec(vec![f32::NAN, -f32::NAN], &[2])
        .unwrap()
        .to_device(gpu)
        .unwrap();
    for dtype in [DType::F16, DType::BF16] {
        let back = nan.astype(dtype).unwrap().astype(DType::F32).unwrap();
        let back = back.to_vec::<f32>().unwrap();
        assert!(back[0].is_nan() && back[1].is_nan(), "{dtype}: {back:?}");
        assert!(
            back[0].is_sign_positive() && back[1].is_sign_negative(),
            "{dtype}: the NaNs' signs are lost: {back:?}"
        );
    }
}
