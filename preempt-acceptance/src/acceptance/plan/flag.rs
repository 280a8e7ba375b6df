//! A child's flags named by the typed options they set, not spelled: `flag!(RunOptions, samples)`
//! is `--samples`, read from `RunOptions`' clap definition. A field that does not exist does not
//! compile, and a flag renamed in its options follows by itself; the plan's tests then parse every
//! child line with the real CLI.

/// `--<long>` of the option that `$field` of the options type `$ty` defines.
macro_rules! flag {
    ($ty:ty, $field:ident) => {{
        // The field exists on the type (compile time).
        let _ = |o: &$ty| {
            let _ = &o.$field;
        };
        $crate::acceptance::plan::flag::long::<$ty>(stringify!($field))
    }};
}
pub(crate) use flag;

/// The long flag of the argument `id` (a field's name, clap's id for it) in `T`'s definition.
///
/// # Panics
/// When `T` defines no long option `id` (a positional, a skipped field): a mistake in the plan,
/// which its tests, building every child line, find.
pub fn long<T: clap::Args>(id: &str) -> String {
    let cmd = T::augment_args(clap::Command::new("options"));
    let long = cmd
        .get_arguments()
        .find(|a| a.get_id().as_str() == id)
        .and_then(clap::Arg::get_long);
    match long {
        Some(l) => format!("--{l}"),
        None => panic!("{} defines no long option {id}", std::any::type_name::<T>()),
    }
}

#[cfg(test)]
mod tests {
    use crate::options::{Common, Levels, PriorityOptions, RunOptions};

    #[test]
    fn a_flag_is_its_options_own_spelling() {
        assert_eq!(flag!(RunOptions, samples), "--samples");
        assert_eq!(flag!(RunOptions, t_ms), "--t-ms");
        // A field whose flag is named otherwise.
        assert_eq!(flag!(Levels, list), "--levels");
        assert_eq!(flag!(PriorityOptions, duration_arg), "--duration-s");
        assert_eq!(flag!(Common, device), "--device");
    }

    #[test]
    #[should_panic(expected = "defines no long option duration_s")]
    fn a_field_that_is_no_option_is_refused() {
        // duration_s is computed from --duration-s and the preset, never parsed.
        let _ = flag!(PriorityOptions, duration_s);
    }
}
