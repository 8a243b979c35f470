//! `named_enum!`: an enum whose variants are XXL-JOB's names, which owns
//! its list of names (`NAMES`), its parsing (an error naming the field),
//! its printing and its OpenAPI schema, so no other place spells them.

macro_rules! named_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The XXL-JOB name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses an XXL-JOB name; the error names `field`.
            pub fn parse(field: &str, text: &str) -> Result<Self, $crate::error::Error> {
                match text {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::error::Error::invalid(field, format!(
                        "unknown value {other:?}, expected one of {}", Self::NAMES.join(", ")))),
                }
            }
        }

        // By hand: the derive does not see the names through the macro.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some(Self::NAMES.iter().copied()))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                std::borrow::Cow::Borrowed(stringify!($name))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use named_enum;
