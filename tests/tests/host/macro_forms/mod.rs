//! What `#[function_node]` and `#[derive(Link)]` accept: one module per accepted form, each an
//! op or link declared at the module's top level as a user's crate declares it, and a test that
//! runs it. (The forms they refuse are `tests/ui.rs`'s trybuild cases, one file per mistake.)

mod backward_bare_return;
mod backward_parameter_forms;
mod backward_returns_options;
mod custom_wrapper_name;
mod forward_cpu_and_gpu_methods;
mod link_generic;
mod link_nested;
mod link_skip_field;
mod mul_add;
mod multiple_outputs;
mod needs_parameter;
mod new_parameters_and_kernel_params;
mod new_returning_result;
mod non_differentiable;
mod optional_gradient;
mod retain_meta;
mod retained_output;
