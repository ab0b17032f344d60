//! The built-in policy plugin: decides whether a command may run.

/// Returns the deny reason when `command` contains a deny pattern.
pub fn first_deny<'a>(deny: &'a [String], command: &str) -> Option<&'a str> {
    deny.iter()
        .find(|p| command.contains(p.as_str()))
        .map(|p| p.as_str())
}

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../wit/v0.1.0",
        world: "toolhost:plugin/policy-plugin@0.1.0",
        generate_all,
    });
    use exports::toolhost::plugin::policy::{
        Action, Decision, Guest, PermissionRequest, RulesError,
    };

    struct Policy;

    impl Guest for Policy {
        fn validate(_rules: String) -> Result<(), RulesError> {
            Ok(())
        }
        fn decide(rules: String, request: PermissionRequest) -> Decision {
            let deny: Vec<String> = rules
                .lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect();
            let Action::ProcessStart(start) = request.action;
            match super::first_deny(&deny, &start.command) {
                Some(p) => Decision::Deny(format!("matches deny pattern `{p}`")),
                None => Decision::Allow,
            }
        }
    }
    export!(Policy);
}
