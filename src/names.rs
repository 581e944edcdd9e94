//! Closed sets of names, declared once.
//!
//! Error kinds, close reasons and fault modes are each a contract: the same
//! names appear in the report, the metric labels, the docs and on the
//! command line. [`name_table!`] declares such a set in one place: the
//! enum, every value in order (`ALL`), how many there are (`COUNT`), each
//! value's name, and the reverse lookup. Arrays indexed by `value as usize`
//! and sized by `COUNT` then cannot fall out of step with the enum.

/// Declares a fieldless enum whose every variant has a fixed name.
///
/// ```ignore
/// name_table! {
///     /// Why something happened.
///     pub enum Reason {
///         /// It was asked for.
///         Asked = "asked",
///     }
/// }
/// ```
macro_rules! name_table {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order (the order reports list
            /// them in).
            pub const ALL: [$name; [$($label),+].len()] = [$($name::$variant),+];
            /// How many values there are.
            pub const COUNT: usize = [$($label),+].len();

            /// The value's name in reports, metric labels, flags and docs.
            pub fn name(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                }
            }

            /// The value with that name, if any.
            #[allow(dead_code)]
            pub fn from_name(name: &str) -> Option<$name> {
                Self::ALL.into_iter().find(|v| v.name() == name)
            }
        }
    };
}
