//! `Event`'s Deserialize, written by hand for replay speed. The derived one (`#[serde(flatten)]`
//! of the body) made serde buffer every event into its generic `Content` tree before reading
//! it, which was most of a start-up's CPU. This one reads the envelope fields as they come and
//! hands `type` + `data` to `EventBody`'s own adjacently tagged Deserialize; `data` streams
//! straight from the input when `type` came first, as it does in everything crew writes.
//! The accepted shape is unchanged: `{seq, runSeq, time, type, runId?, taskId?, message?, data}`
//! in any key order, unknown keys ignored.

use super::event::{Event, EventBody};
use chrono::{DateTime, Utc};
use serde::de::value::StrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::fmt;

enum Field {
    Seq,
    RunSeq,
    Time,
    RunId,
    TaskId,
    Message,
    Type,
    Data,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an event field name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Field, E> {
                Ok(match s {
                    "seq" => Field::Seq,
                    "runSeq" => Field::RunSeq,
                    "time" => Field::Time,
                    "runId" => Field::RunId,
                    "taskId" => Field::TaskId,
                    "message" => Field::Message,
                    "type" => Field::Type,
                    "data" => Field::Data,
                    _ => Field::Other,
                })
            }
            fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Field, E> {
                match std::str::from_utf8(b) {
                    Ok(s) => self.visit_str(s),
                    Err(_) => Ok(Field::Other),
                }
            }
        }
        d.deserialize_identifier(V)
    }
}

/// The `type` value, borrowed from the input when the input allows it.
struct TypeName<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for TypeName<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TypeName<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an event type name")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(TypeName(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(TypeName(Cow::Owned(s.to_string())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                Ok(TypeName(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Presents `{"type": tag, "data": <data>}` to `EventBody`'s derived Deserialize without
/// building it: `data` is whatever deserializer the value comes from (none when absent).
struct Adjacent<'a, D> {
    tag: &'a str,
    data: Option<D>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Adjacent<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        visitor.visit_map(AdjacentMap {
            tag: self.tag,
            data: self.data,
            next: Next::TypeKey,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

#[derive(Clone, Copy)]
enum Next {
    TypeKey,
    TypeValue,
    DataKey,
    DataValue,
    Done,
}

struct AdjacentMap<'a, D> {
    tag: &'a str,
    data: Option<D>,
    next: Next,
}

impl<'de, D: Deserializer<'de>> MapAccess<'de> for AdjacentMap<'_, D> {
    type Error = D::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, D::Error> {
        let key = match self.next {
            Next::TypeKey => {
                self.next = Next::TypeValue;
                "type"
            }
            Next::DataKey if self.data.is_some() => {
                self.next = Next::DataValue;
                "data"
            }
            _ => {
                self.next = Next::Done;
                return Ok(None);
            }
        };
        seed.deserialize(StrDeserializer::<D::Error>::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, D::Error> {
        match self.next {
            Next::TypeValue => {
                self.next = Next::DataKey;
                seed.deserialize(StrDeserializer::<D::Error>::new(self.tag))
            }
            Next::DataValue => {
                self.next = Next::Done;
                match self.data.take() {
                    Some(d) => seed.deserialize(d),
                    None => Err(de::Error::custom("event data read twice")),
                }
            }
            _ => Err(de::Error::custom("event value without a key")),
        }
    }
}

/// Deserializes `data` as the body of the event type already read.
struct BodySeed<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for BodySeed<'_> {
    type Value = EventBody;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<EventBody, D::Error> {
        EventBody::deserialize(Adjacent {
            tag: self.0,
            data: Some(d),
        })
    }
}

fn once<T, E: de::Error>(slot: &mut Option<T>, v: T, name: &'static str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(name));
    }
    *slot = Some(v);
    Ok(())
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = Event;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a crew event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Event, A::Error> {
        let mut seq: Option<u64> = None;
        let mut run_seq: Option<u64> = None;
        let mut time: Option<DateTime<Utc>> = None;
        // Checked on the way in (journal replay, bundles, clients' copies): these ids name
        // directories and files.
        let mut run_id: Option<Option<crate::ids::SafeId>> = None;
        let mut task_id: Option<Option<crate::ids::SafeId>> = None;
        let mut message: Option<Option<String>> = None;
        let mut kind: Option<TypeName<'de>> = None;
        let mut body: Option<EventBody> = None;
        // `data` before `type` (never written by crew, but valid JSON for the same event).
        let mut early_data: Option<serde_json::Value> = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Seq => once(&mut seq, map.next_value()?, "seq")?,
                Field::RunSeq => once(&mut run_seq, map.next_value()?, "runSeq")?,
                Field::Time => once(&mut time, map.next_value()?, "time")?,
                Field::RunId => once(&mut run_id, map.next_value()?, "runId")?,
                Field::TaskId => once(&mut task_id, map.next_value()?, "taskId")?,
                Field::Message => once(&mut message, map.next_value()?, "message")?,
                Field::Type => once(&mut kind, map.next_value()?, "type")?,
                Field::Data => {
                    if body.is_some() || early_data.is_some() {
                        return Err(de::Error::duplicate_field("data"));
                    }
                    match &kind {
                        Some(k) => body = Some(map.next_value_seed(BodySeed(&k.0))?),
                        None => early_data = Some(map.next_value()?),
                    }
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        let body = match body {
            Some(b) => b,
            None => EventBody::deserialize(Adjacent {
                tag: &kind.0,
                data: early_data,
            })
            .map_err(de::Error::custom)?,
        };
        Ok(Event {
            seq: seq.ok_or_else(|| de::Error::missing_field("seq"))?,
            run_seq: run_seq.ok_or_else(|| de::Error::missing_field("runSeq"))?,
            time: time.ok_or_else(|| de::Error::missing_field("time"))?,
            run_id: run_id.flatten().map(String::from),
            task_id: task_id.flatten().map(String::from),
            message: message.flatten(),
            body,
        })
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Event, String> {
        serde_json::from_str::<Event>(s).map_err(|e| e.to_string())
    }

    const TIME: &str = "\"2025-01-02T03:04:05Z\"";
    const USAGE: &str =
        r#"{"input":5,"output":0,"cacheRead":0,"cacheWrite":0,"cost":0.0,"turns":1}"#;

    #[test]
    fn accepts_and_rejects() {
        // (json, Ok(type name) or Err(substring of the error))
        let cases: Vec<(String, Result<&str, &str>)> = vec![
            (
                format!(
                    r#"{{"seq":1,"runSeq":2,"time":{TIME},"runId":"r","type":"run.started","data":{{}}}}"#
                ),
                Ok("run.started"),
            ),
            // data before type, unknown keys, null optionals
            (
                format!(
                    r#"{{"data":{{"reason":"x"}},"extra":[1,{{}}],"seq":1,"runSeq":0,"time":{TIME},"taskId":null,"type":"task.skipped"}}"#
                ),
                Ok("task.skipped"),
            ),
            (
                format!(
                    r#"{{"seq":1,"runSeq":0,"time":{TIME},"type":"task.completed","data":{{"attempt":1,"usage":{USAGE},"reusedFrom":{{"runId":"a","taskId":"b"}}}}}}"#
                ),
                Ok("task.completed"),
            ),
            (
                format!(r#"{{"seq":1,"runSeq":0,"time":{TIME},"type":"no.such","data":{{}}}}"#),
                Err("unknown variant"),
            ),
            (
                format!(r#"{{"seq":1,"runSeq":0,"time":{TIME},"data":{{}}}}"#),
                Err("missing field `type`"),
            ),
            (
                format!(r#"{{"runSeq":0,"time":{TIME},"type":"run.started","data":{{}}}}"#),
                Err("missing field `seq`"),
            ),
            (
                format!(r#"{{"seq":1,"runSeq":0,"time":{TIME},"type":"run.blocked"}}"#),
                Err("missing field `data`"),
            ),
            (
                format!(
                    r#"{{"seq":1,"seq":2,"runSeq":0,"time":{TIME},"type":"run.started","data":{{}}}}"#
                ),
                Err("duplicate field `seq`"),
            ),
            (
                format!(
                    r#"{{"seq":1,"runSeq":0,"time":{TIME},"type":"run.blocked","data":{{"reason":3}}}}"#
                ),
                Err("invalid type"),
            ),
            ("[1,2]".to_string(), Err("invalid type")),
            // Ids that would leave the state directory (journal replay, bundles).
            (
                format!(
                    r#"{{"seq":1,"runSeq":1,"time":{TIME},"runId":"../x","type":"run.started","data":{{}}}}"#
                ),
                Err("not a valid id"),
            ),
            (
                format!(
                    r#"{{"seq":1,"runSeq":1,"time":{TIME},"runId":"r","taskId":"../../../../x/PWNED","type":"task.skipped","data":{{"reason":"x"}}}}"#
                ),
                Err("not a valid id"),
            ),
        ];
        for (json, want) in cases {
            let got = parse(&json);
            match (&got, want) {
                (Ok(ev), Ok(name)) => assert_eq!(ev.body.type_name(), name, "{json}"),
                (Err(e), Err(part)) => assert!(e.contains(part), "{json}: {e}"),
                _ => panic!("{json}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn from_value_and_from_str_agree() {
        let json = format!(
            r#"{{"seq":7,"runSeq":3,"time":{TIME},"runId":"r","taskId":"t","message":"m","type":"task.failed","data":{{"attempt":2,"usage":{USAGE},"error":"boom"}}}}"#
        );
        let a: Event = serde_json::from_str(&json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let b: Event = serde_json::from_value(v).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.seq, 7);
        assert_eq!(a.run_seq, 3);
        assert_eq!(a.task_id.as_deref(), Some("t"));
        assert_eq!(a.message.as_deref(), Some("m"));
        let back = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Event>(&back).unwrap(), a);
    }
}
