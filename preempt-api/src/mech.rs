//! The Lv3 mechanism of a `hip:N` or `kfd` session: lv3's `auto` chooser or the one asked for,
//! built once per session (dbg-trap opens its self-debug session here), with the reasons kept
//! for [`MechanismInfo`].
use crate::error::{Error, ErrorKind, Result};
use kfd::sysfs::SysRoot;
use kfd::{GracePeriod, Kfd};
use lv3::MechanismChoice;
use lv3::mechanism::{self, MechanismKind, Preempt, Preemptor, ProbeFacts};
use std::sync::Arc;

/// The mechanism a session suspends with, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MechanismInfo {
    /// `preempt-queues`, `dbg-trap` or `update-queue` on a GPU or `kfd` session; `sigstop` on the host
    /// device; `None` where no Lv3 mechanism works (streams then default to Lv1).
    pub name: Option<String>,
    /// What was asked (`auto` or a mechanism name).
    pub asked: String,
    /// Why this mechanism (or why none): one line.
    pub why: String,
    /// Every mechanism in `auto` order with its verdict on this machine, one line each.
    pub verdicts: Vec<String>,
}

/// A session's Lv3 mechanism: the guard-issuing [`Preemptor`] (none where no mechanism works or
/// none was asked for) and why. The one place a mechanism is chosen and built for a GPU.
pub struct Lv3Setup {
    pub preemptor: Option<Arc<Preemptor>>,
    pub info: MechanismInfo,
}

/// The verdict lines of this machine: `/dev/kfd`, then each mechanism in `auto` order.
pub fn probe() -> Vec<String> {
    let facts = ProbeFacts::gather(&SysRoot::default());
    let kfd = match &facts.kfd {
        Some(Ok(v)) => format!("kfd: /dev/kfd opens, KFD ioctl {v}"),
        Some(Err(e)) => format!("kfd: {e}"),
        None => "kfd: not probed".to_string(),
    };
    std::iter::once(kfd)
        .chain(mechanism::probe_order(&facts).iter().map(ToString::to_string))
        .collect()
}

/// What a caller asks of [`Lv3Setup::build`], by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lv3Request {
    /// `auto` (lv3's order) or one mechanism.
    pub choice: MechanismChoice,
    /// The grace period, where the mechanism sets one.
    pub grace: GracePeriod,
    /// Build the mechanism even where the gathered facts say it cannot work (tests on a
    /// kernel whose facts are wrong); the info then says the facts were not checked.
    pub force: bool,
    /// Whether the caller is nothing without Lv3 (`kfd`, a latency run at Lv3): `build` fails
    /// when no mechanism works; otherwise it returns no mechanism and says why in the info.
    pub required: bool,
}

impl Lv3Request {
    /// A caller that is nothing without Lv3: no mechanism is an error.
    pub const fn required(choice: MechanismChoice, grace: GracePeriod) -> Self {
        Lv3Request {
            choice,
            grace,
            force: false,
            required: true,
        }
    }

    /// A caller that runs at Lv1 where no mechanism works (a GPU session).
    pub const fn optional(choice: MechanismChoice, grace: GracePeriod) -> Self {
        Lv3Request {
            required: false,
            ..Lv3Request::required(choice, grace)
        }
    }
}

impl Lv3Setup {
    /// Builds the mechanism `req` asks for: `auto` takes the first usable one in lv3's order (a
    /// setup that fails at run time falls back to the next, and the info says what was skipped),
    /// a named one is refused where the facts say it cannot work (unless `force`).
    pub fn build(req: Lv3Request) -> Result<Lv3Setup> {
        build(req)
    }

    /// No mechanism, on purpose (an Lv1-only session).
    pub fn none(asked: MechanismChoice) -> Lv3Setup {
        Lv3Setup {
            preemptor: None,
            info: MechanismInfo {
                name: None,
                asked: asked.to_string(),
                why: "Lv1 only: no Lv3 mechanism was built".into(),
                verdicts: Vec::new(),
            },
        }
    }
}

/// See [`Lv3Setup::build`].
pub(crate) fn build(req: Lv3Request) -> Result<Lv3Setup> {
    let Lv3Request {
        choice,
        grace,
        force,
        required,
    } = req;
    // Open /dev/kfd first ourselves so that its failure keeps its errno.
    if let Err(e) = Kfd::open() {
        let err = Error::from(e);
        if required || choice != MechanismChoice::Auto {
            return Err(err);
        }
        return Ok(Lv3Setup {
            preemptor: None,
            info: MechanismInfo {
                name: None,
                asked: choice.to_string(),
                why: format!("no Lv3 mechanism: {err}"),
                verdicts: Vec::new(),
            },
        });
    }
    let facts = ProbeFacts::gather(&SysRoot::default());
    let verdicts: Vec<String> = mechanism::probe_order(&facts).iter().map(ToString::to_string).collect();
    let order = MechanismKind::AUTO_ORDER.map(|k| k.name()).join(", ");
    let built: std::result::Result<(Arc<dyn Preempt>, String), Error> = match choice {
        MechanismChoice::Auto if !force => mechanism::build_auto(&facts, Kfd::open, grace)
            .map(|(m, skipped)| {
                let why = if skipped.is_empty() {
                    format!("auto: the first usable mechanism in the order {order}")
                } else {
                    format!(
                        "auto: the first usable mechanism in the order {order}; skipped {}",
                        skipped.join("; ")
                    )
                };
                (m, why)
            })
            .map_err(|lines| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!("no Lv3 mechanism works here: {}", lines.join("; ")),
                )
            }),
        MechanismChoice::Auto => {
            // Forced: try every mechanism's setup in order, whatever the facts say.
            let mut failed = Vec::new();
            let mut out = None;
            for kind in MechanismKind::AUTO_ORDER {
                match Kfd::open()
                    .map_err(Error::from)
                    .and_then(|k| Ok(mechanism::build(kind, k, grace)?))
                {
                    Ok(m) => {
                        out = Some(m);
                        break;
                    }
                    Err(e) => failed.push(format!("{kind}: setup failed: {e}")),
                }
            }
            out.map(|m| {
                (
                    m,
                    format!("auto (forced, facts ignored): first setup that succeeded in the order {order}"),
                )
            })
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::Unavailable,
                    format!("no Lv3 mechanism could be set up: {}", failed.join("; ")),
                )
            })
        }
        MechanismChoice::Only(kind) => {
            let verdict = mechanism::probe_order(&facts).into_iter().find(|v| v.kind == kind);
            match verdict.filter(|v| !v.usable() && !force) {
                Some(v) => Err(Error::new(ErrorKind::Unavailable, v.to_string())),
                None => Kfd::open()
                    .map_err(Error::from)
                    .and_then(|k| Ok(mechanism::build(kind, k, grace)?))
                    .map(|m| {
                        let why = if force {
                            format!("asked for {kind} (forced: the facts were not checked)")
                        } else {
                            format!("asked for {kind}, usable here")
                        };
                        (m, why)
                    }),
            }
        }
    };
    match built {
        Ok((m, why)) => Ok(Lv3Setup {
            info: MechanismInfo {
                name: Some(m.kind().name().to_string()),
                asked: choice.to_string(),
                why,
                verdicts,
            },
            preemptor: Some(Arc::new(Preemptor::from_arc(m))),
        }),
        Err(e) if required || choice != MechanismChoice::Auto => Err(e),
        Err(e) => Ok(Lv3Setup {
            preemptor: None,
            info: MechanismInfo {
                name: None,
                asked: choice.to_string(),
                why: e.message,
                verdicts,
            },
        }),
    }
}
