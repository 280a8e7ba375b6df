//! The line the interposer writes at exit under `PREEMPT_INTERPOSE_LOG=1`, and its reader: one
//! format for the writer and for the tests and scripts that check a run by it.
use std::fmt;

const PREFIX: &str = "preempt-hip: pid ";
const EXITS: &str = " exits: ";

/// What one process's interposer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitLine {
    pub pid: u32,
    pub marks: u64,
    pub suspends: u64,
    pub resumes: u64,
    pub failures: u64,
}

impl fmt::Display for ExitLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PREFIX}{}{EXITS}{} marks, {} suspends, {} resumes, {} failures",
            self.pid, self.marks, self.suspends, self.resumes, self.failures
        )
    }
}

impl ExitLine {
    /// `line` if it is an exit line.
    pub fn parse(line: &str) -> Option<ExitLine> {
        let (pid, counts) = line.strip_prefix(PREFIX)?.split_once(EXITS)?;
        let n: Vec<u64> = counts
            .split(", ")
            .map(|p| p.split_whitespace().next()?.parse().ok())
            .collect::<Option<_>>()?;
        match n[..] {
            [marks, suspends, resumes, failures] => Some(ExitLine {
                pid: pid.parse().ok()?,
                marks,
                suspends,
                resumes,
                failures,
            }),
            _ => None,
        }
    }

    /// Every exit line in a run's stderr (one per interposed process), in order.
    pub fn all(stderr: &str) -> Vec<ExitLine> {
        stderr.lines().filter_map(ExitLine::parse).collect()
    }

    /// The first exit line in a run's stderr.
    pub fn find(stderr: &str) -> Option<ExitLine> {
        stderr.lines().find_map(ExitLine::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_reads_back_as_written_and_nothing_else_reads_as_one() {
        let l = ExitLine {
            pid: 42,
            marks: 200,
            suspends: 7,
            resumes: 7,
            failures: 0,
        };
        assert_eq!(
            l.to_string(),
            "preempt-hip: pid 42 exits: 200 marks, 7 suspends, 7 resumes, 0 failures"
        );
        assert_eq!(ExitLine::parse(&l.to_string()), Some(l));
        let stderr = format!("preempt-hip: pid 42 on the stand-in\n{l}\nhp_requests=1\n");
        assert_eq!((ExitLine::find(&stderr), ExitLine::all(&stderr)), (Some(l), vec![l]));
        assert_eq!(ExitLine::parse("preempt-hip: pid 42 exits: 1 marks, 2 suspends"), None);
        assert_eq!(
            ExitLine::parse("preempt-hip: pid x exits: 1 marks, 2 suspends, 3 resumes, 4 failures"),
            None
        );
    }
}
