use super::*;
use proptest::prelude::*;

#[test]
fn names_round_trip() {
    for name in NAMES {
        match ClientProgram::parse(name).unwrap() {
            None => assert_eq!(name, "qbench"),
            Some(c) => {
                assert_eq!(c.to_string(), name);
                assert_eq!(name.parse::<ClientProgram>().unwrap(), c);
            }
        }
    }
    let e: ClientProgram = "exec:fetch {urls}".parse().unwrap();
    assert_eq!(e.to_string(), "exec:fetch {urls}");
    assert_eq!(e.program(), "fetch");
    let json = serde_json::to_string(&e).unwrap();
    assert_eq!(serde_json::from_str::<ClientProgram>(&json).unwrap(), e);
}

#[test]
fn protocols_are_checked() {
    assert!(ClientProgram::Curl.check(Protocol::H2).is_ok());
    assert_eq!(
        ClientProgram::Curl
            .check(Protocol::H3)
            .unwrap_err()
            .to_string(),
        "curl does not speak h3; it speaks h1 and h2"
    );
    assert!(ClientProgram::Ngtcp2.check(Protocol::H2).is_err());
    assert!(ClientProgram::Chromium.check(Protocol::H1).is_err());
    assert!(matches!(
        ClientProgram::parse("wget"),
        Err(ClientError::Unknown(_))
    ));
    assert!(matches!(
        ClientProgram::parse("exec:"),
        Err(ClientError::Template(TemplateError::Empty))
    ));
}

proptest! {
    #[test]
    fn any_name_is_a_value_or_an_error(s in ".{0,40}") {
        let _ = ClientProgram::parse(&s);
    }
}
