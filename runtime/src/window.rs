//! The geometry of a sliding window over the spatial axes of an `(N, C, spatial...)` array, as
//! convolution and pooling use it: per spatial axis the input size, the window's size, stride,
//! padding and dilation, and the output size Chainer's rules give (`cover_all` included).
//!
//! Element `(k, o)` of the window at output position `o` reads input position
//! `o * stride - pad + k * dilate`, or the padding value when that lies outside the input.

use crate::error::{Error, Result};

/// The most spatial axes a window has (1-, 2- and 3-d convolution and pooling).
pub(crate) const MAX_SPATIAL: usize = 3;

/// A sliding window's geometry: one entry per spatial axis in each field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub(crate) input: Vec<usize>,
    pub(crate) output: Vec<usize>,
    pub(crate) ksize: Vec<usize>,
    pub(crate) stride: Vec<usize>,
    pub(crate) pad: Vec<usize>,
    pub(crate) dilate: Vec<usize>,
}

/// A window's parameters as the user gives them (one value for every axis, or one per axis).
#[derive(Clone, Debug)]
pub(crate) struct WindowArgs<'a> {
    pub(crate) ksize: &'a [usize],
    pub(crate) stride: &'a [usize],
    pub(crate) pad: &'a [usize],
    pub(crate) dilate: &'a [usize],
}

/// `v` for `n` axes: one value repeated, or `n` values.
fn per_axis(op: &'static str, name: &str, v: &[usize], n: usize) -> Result<Vec<usize>> {
    match v.len() {
        1 => Ok(vec![v[0]; n]),
        len if len == n => Ok(v.to_vec()),
        len => Err(Error::Shape {
            op,
            msg: format!(
                "{name} {v:?} has {len} values; give one for every spatial axis or one per axis ({n})"
            ),
        }),
    }
}

impl WindowArgs<'_> {
    /// The per-axis values for `n` spatial axes, each checked (sizes, strides and dilations
    /// at least 1).
    fn resolve(&self, op: &'static str, n: usize) -> Result<[Vec<usize>; 4]> {
        let ksize = per_axis(op, "ksize", self.ksize, n)?;
        let stride = per_axis(op, "stride", self.stride, n)?;
        let pad = per_axis(op, "pad", self.pad, n)?;
        let dilate = per_axis(op, "dilate", self.dilate, n)?;
        for (name, v) in [("ksize", &ksize), ("stride", &stride), ("dilate", &dilate)] {
            if v.contains(&0) {
                return Err(Error::Shape {
                    op,
                    msg: format!("{name} must be at least 1 on every axis, got {v:?}"),
                });
            }
        }
        Ok([ksize, stride, pad, dilate])
    }
}

/// The extent of a dilated window: `d * (k - 1) + 1`, or `None` on overflow.
fn extent(k: usize, d: usize) -> Option<usize> {
    k.checked_sub(1)?.checked_mul(d)?.checked_add(1)
}

impl Window {
    /// The window of a convolution or pooling over an input with spatial sizes `input`; the
    /// output size is `(in + 2p - dk) / s + 1`, or `(in + 2p - dk + s - 1) / s + 1` with
    /// `cover_all` (Chainer's `get_conv_outsize`). A window larger than the padded input, or
    /// sizes that overflow, are errors naming `op`.
    pub(crate) fn new(
        op: &'static str,
        input: &[usize],
        args: &WindowArgs<'_>,
        cover_all: bool,
    ) -> Result<Window> {
        let n = check_ndim(op, input.len())?;
        let [ksize, stride, pad, dilate] = args.resolve(op, n)?;
        let mut output = Vec::with_capacity(n);
        for a in 0..n {
            let overflow = || Error::Shape {
                op,
                msg: format!(
                    "axis {a}: the window (ksize {}, dilate {}, pad {}) overflows",
                    ksize[a], dilate[a], pad[a]
                ),
            };
            let dk = extent(ksize[a], dilate[a]).ok_or_else(overflow)?;
            let padded = pad[a]
                .checked_mul(2)
                .and_then(|p| p.checked_add(input[a]))
                .ok_or_else(overflow)?;
            if padded < dk {
                return Err(Error::Shape {
                    op,
                    msg: format!(
                        "the window is larger than the padded input on spatial axis {a}: \
                         input {input:?}, ksize {ksize:?}, dilate {dilate:?} (extent {dk}), \
                         pad {pad:?} (padded size {padded})"
                    ),
                });
            }
            let span = padded - dk + if cover_all { stride[a] - 1 } else { 0 };
            output.push(span / stride[a] + 1);
        }
        Ok(Window {
            input: input.to_vec(),
            output,
            ksize,
            stride,
            pad,
            dilate,
        })
    }

    /// The window of a transposed convolution (deconvolution) whose input, the convolution's
    /// output, has spatial sizes `output`: its spatial size is `outsize` when given (checked to
    /// give back `output`), else `s (out - 1) + dk - 2p`, or with `cover_all`
    /// `s (out - 1) + dk - s + 1 - 2p` (Chainer's `get_deconv_outsize`).
    pub(crate) fn transposed(
        op: &'static str,
        output: &[usize],
        args: &WindowArgs<'_>,
        cover_all: bool,
        outsize: Option<&[usize]>,
    ) -> Result<Window> {
        let n = check_ndim(op, output.len())?;
        let input = match outsize {
            Some(size) => per_axis(op, "outsize", size, n)?,
            None => {
                let [ksize, stride, pad, dilate] = args.resolve(op, n)?;
                let mut input = Vec::with_capacity(n);
                for a in 0..n {
                    let size = output[a]
                        .checked_sub(1)
                        .and_then(|o| o.checked_mul(stride[a]))
                        .and_then(|o| o.checked_add(extent(ksize[a], dilate[a])?))
                        .map(|o| if cover_all { o + 1 - stride[a] } else { o })
                        .and_then(|o| o.checked_sub(2 * pad[a]))
                        .filter(|&o| o > 0);
                    input.push(size.ok_or_else(|| Error::Shape {
                        op,
                        msg: format!(
                            "the output would be empty or negative on spatial axis {a}: input \
                             {output:?}, ksize {ksize:?}, stride {stride:?}, pad {pad:?}, \
                             dilate {dilate:?}"
                        ),
                    })?);
                }
                input
            }
        };
        let w = Window::new(op, &input, args, cover_all)?;
        if w.output != output {
            return Err(Error::Shape {
                op,
                msg: format!(
                    "outsize {input:?} does not fit: a convolution of it with ksize {:?}, \
                     stride {:?}, pad {:?}, dilate {:?} gives {:?}, not the input's {output:?}",
                    w.ksize, w.stride, w.pad, w.dilate, w.output
                ),
            });
        }
        Ok(w)
    }

    /// Spatial axes.
    pub(crate) fn ndim(&self) -> usize {
        self.input.len()
    }

    /// Elements of one window.
    pub(crate) fn kernel_size(&self) -> usize {
        self.ksize.iter().product()
    }

    /// Output positions.
    pub(crate) fn output_size(&self) -> usize {
        self.output.iter().product()
    }

    /// Input positions.
    pub(crate) fn input_size(&self) -> usize {
        self.input.iter().product()
    }

    /// The geometry with unit axes prepended up to three (a 1- or 2-d window as a 3-d one):
    /// `[input, output, ksize, stride, pad, dilate]`, each of three axes.
    pub(crate) fn as_3d(&self) -> [[usize; MAX_SPATIAL]; 6] {
        let lead = MAX_SPATIAL - self.ndim();
        let fill = |v: &[usize], unit: usize| {
            let mut out = [unit; MAX_SPATIAL];
            out[lead..].copy_from_slice(v);
            out
        };
        [
            fill(&self.input, 1),
            fill(&self.output, 1),
            fill(&self.ksize, 1),
            fill(&self.stride, 1),
            fill(&self.pad, 0),
            fill(&self.dilate, 1),
        ]
    }
}

/// The sizes of a convolution: samples, groups, input and output channels per group, kernel
/// elements, input and output positions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvDims {
    pub(crate) n: usize,
    pub(crate) groups: usize,
    pub(crate) cg: usize,
    pub(crate) ocg: usize,
    pub(crate) k: usize,
    pub(crate) l_in: usize,
    pub(crate) l_out: usize,
}

impl ConvDims {
    pub(crate) fn new(n: usize, c: usize, oc: usize, groups: usize, w: &Window) -> Self {
        ConvDims {
            n,
            groups,
            cg: c / groups,
            ocg: oc / groups,
            k: w.kernel_size(),
            l_in: w.input_size(),
            l_out: w.output_size(),
        }
    }
}

/// Which of the three products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvPass {
    /// `(x, W)` → `y`.
    Forward,
    /// `(gy, W)` → `gx`: a transposed convolution.
    BackwardData,
    /// `(x, gy)` → `gW`.
    BackwardFilter,
}

/// `n` spatial axes, checked to be 1 to 3.
fn check_ndim(op: &'static str, n: usize) -> Result<usize> {
    if (1..=MAX_SPATIAL).contains(&n) {
        Ok(n)
    } else {
        Err(Error::Shape {
            op,
            msg: format!(
                "{n} spatial axes: 1, 2 or 3 are supported (inputs are (N, C, spatial...))"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<'a>(k: &'a [usize], s: &'a [usize], p: &'a [usize], d: &'a [usize]) -> WindowArgs<'a> {
        WindowArgs {
            ksize: k,
            stride: s,
            pad: p,
            dilate: d,
        }
    }

    #[test]
    fn output_sizes_follow_chainers_rules() {
        // (5 + 2 - 3) / 2 + 1 = 3; with cover_all (5 + 2 - 3 + 1) / 2 + 1 = 3.
        let w = Window::new("t", &[5, 6], &args(&[3], &[2], &[1], &[1]), false).unwrap();
        assert_eq!(w.output, vec![3, 3]);
        let w = Window::new("t", &[6], &args(&[3], &[2], &[0], &[1]), true).unwrap();
        assert_eq!(w.output, vec![3]); // (6 - 3 + 1) / 2 + 1
        let w = Window::new("t", &[6], &args(&[3], &[2], &[0], &[1]), false).unwrap();
        assert_eq!(w.output, vec![2]); // (6 - 3) / 2 + 1
        // Dilation 2 makes a 3-wide kernel span 5.
        let w = Window::new("t", &[7], &args(&[3], &[1], &[0], &[2]), false).unwrap();
        assert_eq!(w.output, vec![3]);
        assert!(Window::new("t", &[4], &args(&[3], &[1], &[0], &[2]), false).is_err());
    }

    #[test]
    fn transposed_sizes_invert_the_convolution() {
        let a = args(&[3], &[2], &[1], &[1]);
        let w = Window::transposed("t", &[3], &a, false, None).unwrap();
        assert_eq!(w.input, vec![5]); // 2 * 2 + 3 - 2
        // 6 also convolves to 3 with these settings; 7 does not.
        assert!(Window::transposed("t", &[3], &a, false, Some(&[6])).is_ok());
        assert!(Window::transposed("t", &[3], &a, false, Some(&[7])).is_err());
    }
}
