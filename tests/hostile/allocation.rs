//! See the table in main.rs.
