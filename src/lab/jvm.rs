//! A JVM server for the lab and the tests: the JDK's built-in HttpServer
//! (`com.sun.net.httpserver`), started with the single-file source launcher
//! (`java Up.java HOST PORT`), answering every request with a fixed body after a sleep.
//! Like every JVM server it listens on an IPv6 socket (IPv4-mapped for an IPv4
//! address), and it writes each response's head and body in two writes.

/// The source of `Up.java`: `sleep_ms` then `body` bytes, on `HOST PORT` (its
/// arguments), with 64 threads.
pub fn up_java(sleep_ms: u32, body: usize) -> String {
    up_java_pool(sleep_ms, body, 64)
}

/// [`up_java`] with a pool of `threads` request threads (a servlet container's
/// `maxThreads`): requests beyond them wait in the executor's queue, inside the JVM,
/// with every thread asleep and the CPUs idle.
pub fn up_java_pool(sleep_ms: u32, body: usize, threads: u32) -> String {
    format!(
        r#"
import com.sun.net.httpserver.*;
import java.net.InetSocketAddress;
public class Up {{
    public static void main(String[] a) throws Exception {{
        HttpServer s = HttpServer.create(new InetSocketAddress(a[0], Integer.parseInt(a[1])), 1024);
        byte[] body = new byte[{body}];
        s.createContext("/", x -> {{
            if ({sleep_ms} > 0) {{
                try {{ Thread.sleep({sleep_ms}); }} catch (InterruptedException e) {{}}
            }}
            x.sendResponseHeaders(200, body.length);
            x.getResponseBody().write(body);
            x.close();
        }});
        s.setExecutor(java.util.concurrent.Executors.newFixedThreadPool({threads}));
        s.start();
    }}
}}
"#
    )
}
