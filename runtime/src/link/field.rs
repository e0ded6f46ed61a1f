//! [`LinkField`]: what a field of a `#[derive(Link)]` struct can hold.

use super::{Link, Parameter};

/// A field of a `#[derive(Link)]` struct: something that holds parameters. Implemented for a
/// [`Parameter`] (visited at the field's path), an `Option` of a link field (visited when
/// `Some`), a `Vec` of link fields (element `i` at `path/i`) and every [`Link`] (its parameters
/// under the field's path).
///
/// ```
/// use kusari::link::{initializers::Zero, LinkField, Parameter};
/// use kusari::{DType, Result};
/// # fn main() -> Result<()> {
/// let layers = vec![Some(Parameter::with_shape(Zero, &[2], DType::F32)?), None];
/// let mut paths = Vec::new();
/// layers.visit_field("/w", &mut |path, _| paths.push(path));
/// assert_eq!(paths, ["/w/0"]);
/// # Ok(()) }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` holds no parameters: #[derive(Link)] cannot visit this field",
    label = "not a `Parameter`, an `Option` or `Vec` of them, or a `Link`",
    note = "mark fields that hold no parameters with #[kusari(skip)]"
)]
pub trait LinkField {
    /// Calls `f` with every parameter in the field and its path, `path` being the field's own.
    fn visit_field<'a>(&'a self, path: &str, f: &mut dyn FnMut(String, &'a Parameter));
}

impl LinkField for Parameter {
    fn visit_field<'a>(&'a self, path: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        f(path.to_string(), self);
    }
}

impl<T: LinkField> LinkField for Option<T> {
    fn visit_field<'a>(&'a self, path: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        if let Some(inner) = self {
            inner.visit_field(path, f);
        }
    }
}

impl<T: LinkField> LinkField for Vec<T> {
    fn visit_field<'a>(&'a self, path: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        for (i, item) in self.iter().enumerate() {
            item.visit_field(&format!("{path}/{i}"), f);
        }
    }
}

// Not recommended in errors: a field that is no link field is reported as such (with the hint
// to skip it), not as a type that lacks `Link`, followed by a list of every link there is.
#[diagnostic::do_not_recommend]
impl<T: Link> LinkField for T {
    fn visit_field<'a>(&'a self, path: &str, f: &mut dyn FnMut(String, &'a Parameter)) {
        self.visit_params(path, f);
    }
}
