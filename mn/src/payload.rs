//! Arrays as bytes on the wire: a header (dtype, shape) and the elements in C order,
//! little-endian. The receiver rebuilds the array on the device it asks for.

use kusari::{Array, DType, Device};

use crate::error::{Error, Result};

/// `array` as a message: dtype (1 byte), number of dimensions (1 byte), each dimension (8 bytes),
/// then the elements.
pub(crate) fn encode(array: &Array) -> Result<Vec<u8>> {
    let shape = array.shape();
    let dtype = array.dtype();
    let mut out = Vec::with_capacity(2 + 8 * shape.len() + array.size() * dtype.size_in_bytes());
    out.push(dtype_code(dtype));
    out.push(u8::try_from(shape.len()).expect("kusari arrays have at most 32 dimensions"));
    for &d in shape {
        out.extend_from_slice(&(d as u64).to_le_bytes());
    }
    macro_rules! elements {
        ($t:ty) => {
            for v in array.to_vec::<$t>()? {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
    }
    match dtype {
        DType::Bool => out.extend(array.to_vec::<bool>()?.into_iter().map(u8::from)),
        DType::I8 => elements!(i8),
        DType::I16 => elements!(i16),
        DType::I32 => elements!(i32),
        DType::I64 => elements!(i64),
        DType::U8 => elements!(u8),
        DType::U16 => elements!(u16),
        DType::U32 => elements!(u32),
        DType::U64 => elements!(u64),
        DType::F16 => elements!(half::f16),
        DType::BF16 => elements!(half::bf16),
        DType::F32 => elements!(f32),
        DType::F64 => elements!(f64),
    }
    Ok(out)
}

/// The dtype and shape of a message of [`encode`], and where its elements start.
pub(crate) fn header(bytes: &[u8]) -> Option<(DType, Vec<usize>, usize)> {
    let dtype = dtype_of(*bytes.first()?)?;
    let ndim = usize::from(*bytes.get(1)?);
    let end = 2 + 8 * ndim;
    let dims = bytes.get(2..end)?;
    let shape = dims
        .chunks_exact(8)
        .map(|d| u64::from_le_bytes(d.try_into().unwrap()) as usize)
        .collect();
    Some((dtype, shape, end))
}

/// The array of a message of [`encode`], on `device`.
pub(crate) fn decode(op: &str, rank: usize, bytes: &[u8], device: Device) -> Result<Array> {
    let bad = |why: &str| Error::Transport {
        op: op.into(),
        rank,
        msg: format!("a received array cannot be read: {why}"),
    };
    let (dtype, shape, start) = header(bytes).ok_or_else(|| bad("no header"))?;
    let data = &bytes[start..];
    let n: usize = shape.iter().product();
    if data.len() != n * dtype.size_in_bytes() {
        return Err(bad(&format!(
            "{} bytes for {n} elements of {dtype}",
            data.len()
        )));
    }
    macro_rules! array {
        ($t:ty) => {{
            let v: Vec<$t> = data
                .chunks_exact(std::mem::size_of::<$t>())
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap()))
                .collect();
            Array::from_vec(v, &shape)?
        }};
    }
    let host = match dtype {
        DType::Bool => Array::from_vec(data.iter().map(|&b| b != 0).collect(), &shape)?,
        DType::I8 => array!(i8),
        DType::I16 => array!(i16),
        DType::I32 => array!(i32),
        DType::I64 => array!(i64),
        DType::U8 => array!(u8),
        DType::U16 => array!(u16),
        DType::U32 => array!(u32),
        DType::U64 => array!(u64),
        DType::F16 => array!(half::f16),
        DType::BF16 => array!(half::bf16),
        DType::F32 => array!(f32),
        DType::F64 => array!(f64),
    };
    Ok(host.to_device(device)?)
}

/// `dtype` as one byte on the wire.
pub(crate) fn dtype_code(dtype: DType) -> u8 {
    DType::ALL
        .iter()
        .position(|&d| d == dtype)
        .expect("every dtype is in DType::ALL") as u8
}

/// The dtype of a [`dtype_code`], `None` for a byte that is none.
pub(crate) fn dtype_of(code: u8) -> Option<DType> {
    DType::ALL.get(usize::from(code)).copied()
}
