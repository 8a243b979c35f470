//! The languages the web console speaks, which a user may choose for
//! themselves (`PUT /api/v1/auth/language`, `rondo account language`).
//! One list: the API validates against it, the spec and the CLI's help
//! show it.

use crate::named::named_enum;

named_enum!(
    /// A console language, by its BCP 47 tag.
    Language {
        /// Simplified Chinese.
        ZhCn = "zh-CN",
        /// Traditional Chinese.
        ZhTw = "zh-TW",
        /// English.
        En = "en",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_reads_back_by_its_tag_and_others_are_refused_by_name() {
        for tag in Language::NAMES {
            let language = Language::parse("language", tag).expect(tag);
            assert_eq!(language.as_str(), *tag);
            let json = serde_json::to_string(&language).unwrap();
            assert_eq!(json, format!("\"{tag}\""));
        }
        for other in ["fr", "zh", "EN", "zh-cn", ""] {
            let e = Language::parse("language", other).expect_err(other);
            assert_eq!(e.field.as_deref(), Some("language"), "{other:?}");
        }
    }
}
