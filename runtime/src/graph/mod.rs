//! The backward graph: [`Variable`]s and the functions applied to them, recorded as they run
//! and walked back by [`Variable::backward`] and [`grad`].
//!
//! Its files, each importing only files above it in this list (so they form no cycle):
//! - `node`: the node types, which refer to one another: [`Variable`] (a handle), `VarNode`
//!   and `FuncNode`;
//! - `fallback`: running a function's CPU forward on host copies of CUDA inputs;
//! - `variable`: [`Variable`]'s methods;
//! - `function_node`: the [`FunctionNode`] contract, its contexts, and [`apply`];
//! - `function`: old-style [`Function`]s (array-level backward);
//! - `grad_math`: the graph's own nodes for summing and scaling gradients;
//! - `backward`: the backward pass, [`Variable::backward`] and [`grad`].

mod backward;
mod function;
mod function_node;
mod grad_hook;
mod grad_math;
mod host_fallback;
mod node;
mod variable;

pub use backward::{BackwardOptions, GradOptions, GradOutputs, grad};
pub use function::Function;
pub use function_node::{BackwardContext, Formula, ForwardContext, FunctionNode, InputMeta, apply};
pub use grad_hook::GradReadyHook;
pub(crate) use node::GraphNode;
pub use node::Variable;
