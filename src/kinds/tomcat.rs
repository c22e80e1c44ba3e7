//! Apache Tomcat: everything loadlens knows of it in one file. Tomcat runs on the JVM:
//! its process is `java`, recognised as Tomcat by its main class on the command line
//! (`org.apache.catalina.startup.Bootstrap`, which `catalina.sh` and Debian's
//! `tomcat10.service` run). One process serves with a pool of request threads per
//! Connector: `maxThreads` (200 by default; or the `Executor` the Connector names),
//! `acceptCount` the listen backlog (100), `maxConnections` the connections it holds
//! (8192 with NIO). Its configuration is `conf/server.xml` under `-Dcatalina.base=`
//! (Debian: `/var/lib/tomcat10/conf`, a link to `/etc/tomcat10`), or the file of
//! Bootstrap's `-config FILE`. Config test: Bootstrap's `configtest` command; Tomcat
//! re-reads server.xml only when restarted (no reload signal).
//!
//! Sources: Tomcat 10.1's "The HTTP Connector" (`maxThreads`, `acceptCount`,
//! `maxConnections`, `executor`, `maxKeepAliveRequests`), "The Executor", and
//! RUNNING.txt / catalina.sh (`configtest`, `-config`, `catalina.base`).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::{exe, Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerConfig, ServerKind};

pub struct Tomcat;

/// Tomcat's main class, on every Tomcat's command line.
const MAIN: &str = "org.apache.catalina.";

/// Debian's CATALINA_BASE.
const DEFAULT_BASE: &str = "/var/lib/tomcat10";

/// The elements whose attributes are Tomcat's knobs.
const ELEMENTS: &[&str] = &["Connector", "Executor"];

/// One element of server.xml: its label (`Connector 8080`, `Executor pool`), its
/// attributes, and where its start tag's `>` (or `/>`) is.
struct Element {
    label: String,
    attrs: Vec<Found>,
    end: usize,
}

/// The parts of `text` outside XML comments, with their offsets.
fn uncommented(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find("<!--") {
        out.push((at, &text[at..at + i]));
        match text[at + i..].find("-->") {
            Some(j) => at = at + i + j + 3,
            None => return out,
        }
    }
    out.push((at, &text[at..]));
    out
}

/// The `name="value"` attributes of a start tag's inside `s` (at byte `at`).
fn attributes(s: &str, at: usize) -> Vec<(String, String, Range<usize>)> {
    let mut out = Vec::new();
    let mut rest = s;
    let mut off = 0;
    while let Some(eq) = rest.find('=') {
        let name = rest[..eq].trim();
        let name = name.rsplit(char::is_whitespace).next().unwrap_or(name);
        let after = &rest[eq + 1..];
        let lead = after.len() - after.trim_start().len();
        let a = &after[lead..];
        let Some(q) = a.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            break;
        };
        let Some(end) = a[1..].find(q) else { break };
        let from = at + off + eq + 1 + lead + 1;
        out.push((
            name.to_string(),
            a[1..1 + end].to_string(),
            from..from + end,
        ));
        let consumed = eq + 1 + lead + 1 + end + 1;
        off += consumed;
        rest = &rest[consumed..];
    }
    out
}

/// The Connector and Executor elements outside comments.
fn elements(text: &str) -> Vec<Element> {
    let mut out = Vec::new();
    for (at, part) in uncommented(text) {
        let mut from = 0;
        while let Some(i) = part[from..].find('<') {
            let start = from + i + 1;
            let name_end = part[start..]
                .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
                .map_or(part.len(), |j| start + j);
            let name = &part[start..name_end];
            let Some(close) = part[name_end..].find('>') else {
                break;
            };
            let close = name_end + close;
            from = close;
            if !ELEMENTS.contains(&name) {
                continue;
            }
            let inside = part[name_end..close].trim_end_matches('/');
            let attrs = attributes(inside, at + name_end);
            let id = attrs
                .iter()
                .find(|(n, _, _)| n == if name == "Executor" { "name" } else { "port" })
                .map(|(_, v, _)| v.clone())
                .unwrap_or_default();
            let label = format!("{name} {id}").trim_end().to_string();
            let end = at + name_end + inside.trim_end().len();
            out.push(Element {
                attrs: attrs
                    .into_iter()
                    .map(|(name, value, range)| Found {
                        name,
                        value,
                        range,
                        block: vec![label.clone()],
                    })
                    .collect(),
                label,
                end,
            });
        }
    }
    out
}

/// The server.xml a Tomcat command line names: Bootstrap's `-config FILE` (relative to
/// the base), else `conf/server.xml` under `-Dcatalina.base=` (or `catalina.home`).
fn conf_of(args: &[String]) -> PathBuf {
    let prop = |p: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("-D{p}=")).map(PathBuf::from))
    };
    let base = prop("catalina.base")
        .or_else(|| prop("catalina.home"))
        .unwrap_or_else(|| DEFAULT_BASE.into());
    match super::arg_after(args, "-config") {
        Some(f) => base.join(f),
        None => base.join("conf/server.xml"),
    }
}

impl Tomcat {
    /// Each Connector's and Executor's attributes (each value in the order of the
    /// elements), and the Connectors' ports as `listen`.
    pub fn parse(&self, text: &str) -> ServerConfig {
        let mut directives: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for f in self.scan(text) {
            directives.entry(f.name).or_default().push(f.value);
        }
        ServerConfig {
            kind: KIND,
            conf: String::new(),
            directives,
            upstreams: Vec::new(),
        }
    }
}

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("tomcat");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "Tomcat",
    title: "Apache Tomcat",
    executable: |_| false,
    ignore_case: false,
};

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &Tomcat;

/// What Tomcat calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Pool | Knob::Workers => ("`maxThreads` on Tomcat's Connector in server.xml (or on the `Executor` it names; 200 by default): each thread serves one request at a time", Some("maxThreads")),
        Knob::Connections => ("`maxConnections` on Tomcat's Connector (8192 by default with NIO)", Some("maxConnections")),
        Knob::Backlog => ("`acceptCount` on Tomcat's Connector (the listen backlog, 100 by default)", Some("acceptCount")),
        Knob::KeepAlive => ("`maxKeepAliveRequests` and `keepAliveTimeout` on Tomcat's Connector", Some("maxKeepAliveRequests")),
        Knob::OpenFiles => ("`LimitNOFILE=` in tomcat10.service", None),
        Knob::Affinity | Knob::UpstreamReuse | Knob::Reuseport | Knob::UdpBuffer => {
            return None
        }
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

impl Server for Tomcat {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn recognises(&self, exe: &str, args: &[String]) -> bool {
        exe.starts_with("java") && args.iter().any(|a| a.starts_with(MAIN))
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        let a = crate::sys::procfs::read_cmdline(pid)
            .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))?;
        if !a.iter().any(|x| x.starts_with(MAIN)) {
            anyhow::bail!("java {pid} is not Tomcat (no {MAIN}… on its command line)");
        }
        Ok(conf_of(&a))
    }

    /// The attributes of every Connector and Executor outside comments, each in its
    /// element (`Connector 8080`, `Executor tomcatThreadPool`).
    fn scan(&self, text: &str) -> Vec<Found> {
        elements(text).into_iter().flat_map(|e| e.attrs).collect()
    }

    /// A new attribute at the end of the start tag of element `block`.
    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        let e = elements(text).into_iter().find(|e| e.label == block)?;
        Some((e.end, format!(" {name}=\"{value}\"")))
    }

    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>> {
        let a = crate::sys::procfs::read_cmdline(pid)
            .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))?;
        let Some(main) = a.iter().position(|x| x.starts_with(MAIN)) else {
            anyhow::bail!("java {pid} is not Tomcat (no {MAIN}… on its command line)");
        };
        let mut cmd = vec![exe(pid)?];
        cmd.extend(a[1..=main].iter().cloned());
        cmd.extend([
            "-config".into(),
            file.display().to_string(),
            "configtest".into(),
        ]);
        Ok(cmd)
    }

    fn reload_signal(&self, pid: i32) -> anyhow::Result<i32> {
        anyhow::bail!(
            "Tomcat {pid} reads server.xml only when it starts: restart it (`systemctl restart tomcat10`)"
        )
    }

    fn reads_config(&self) -> bool {
        true
    }

    fn read_config(&self, pid: i32) -> Result<ServerConfig, String> {
        let file = self.config_file(pid).map_err(|e| e.to_string())?;
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut c = self.parse(&text);
        c.conf = file.display().to_string();
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{add, find, set};

    /// Debian 12's /etc/tomcat10/server.xml (tomcat10 10.1): one Connector on 8080
    /// without `maxThreads`; the Executor and three other Connectors are commented out.
    const DEBIAN: &str = include_str!("../../tests/data/kinds/tomcat10-server.xml");

    #[test]
    fn reads_debians_server_xml() {
        let c = Tomcat.parse(DEBIAN);
        assert_eq!(c.get("port").as_deref(), Some("8080"), "{c:?}");
        assert_eq!(c.get("connectionTimeout").as_deref(), Some("20000"));
        assert_eq!(c.get("maxThreads"), None, "commented out: 200 by default");
        let found = find(&Tomcat, DEBIAN, "redirectPort", None);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].block, ["Connector 8080"]);
        // A new attribute at the end of the Connector's tag, every other byte kept.
        let t = add(&Tomcat, DEBIAN, "Connector 8080", "maxThreads", "400").unwrap();
        assert_eq!(t.len(), DEBIAN.len() + " maxThreads=\"400\"".len());
        let c = Tomcat.parse(&t);
        assert_eq!(c.get("maxThreads").as_deref(), Some("400"));
        let (t2, old) = set(&Tomcat, &t, "maxThreads", None, "800").unwrap();
        assert_eq!(old, "400");
        assert_eq!(t2, t.replace("maxThreads=\"400\"", "maxThreads=\"800\""));
    }

    #[test]
    fn reads_a_connector_on_one_line_and_an_executor() {
        let xml = r#"<Server port="-1"><Service name="Catalina">
  <!-- <Connector port="8443" maxThreads="150" /> -->
  <Executor name="pool" maxThreads='6'/>
  <Connector port="18080" address="127.0.0.1" maxThreads="2" acceptCount="10" maxConnections="50"/>
  <Connector executor="pool" port="18081"/>
</Service></Server>"#;
        let c = Tomcat.parse(xml);
        assert_eq!(c.get("maxThreads").as_deref(), Some("6 | 2"));
        assert_eq!(c.get("acceptCount").as_deref(), Some("10"));
        assert_eq!(c.get("maxConnections").as_deref(), Some("50"));
        assert_eq!(
            find(&Tomcat, xml, "maxThreads", None)[1].block,
            ["Connector 18080"]
        );
        assert_eq!(
            find(&Tomcat, xml, "executor", None)[0].block,
            ["Connector 18081"]
        );
    }

    #[test]
    fn recognised_from_its_command_line() {
        let a: Vec<String> = "java -Djava.util.logging.config.file=/var/lib/tomcat10/conf/logging.properties -Dcatalina.base=/var/lib/tomcat10 -Dcatalina.home=/usr/share/tomcat10 -Djava.io.tmpdir=/tmp org.apache.catalina.startup.Bootstrap start"
            .split(' ')
            .map(String::from)
            .collect();
        assert!(Tomcat.recognises("java", &a));
        assert!(!Tomcat.recognises("java", &a[..a.len() - 2]));
        assert_eq!(conf_of(&a), Path::new("/var/lib/tomcat10/conf/server.xml"));
        let b: Vec<String> = [
            "java",
            "-Dcatalina.base=/srv/tc",
            "org.apache.catalina.startup.Bootstrap",
            "-config",
            "conf/other.xml",
            "start",
        ]
        .map(String::from)
        .into();
        assert_eq!(conf_of(&b), Path::new("/srv/tc/conf/other.xml"));
    }
}
