# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_loadlens_global_optspecs
    string join \n h/help V/version
end

function __fish_loadlens_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_loadlens_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_loadlens_using_subcommand
    set -l cmd (__fish_loadlens_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c loadlens -n "__fish_loadlens_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c loadlens -n "__fish_loadlens_needs_command" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "run" -d 'Load-test a URL and report throughput, latency and errors'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "compare" -d 'Compare saved Runs: the numbers side by side, each change with a verdict (significant / not significant / not enough data)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "merge" -d 'Merge the segment Runs of a load split over machines (`run --segment I/N`) into the Run of the whole load: counts summed, histograms added, findings recomputed'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "attach" -d 'Join a Run made without a watch to a watch run alone on the server (`loadlens watch URL --duration D --json FILE`), by wall clock, and diagnose it again'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "sweep" -d 'A study in one command: the cross product of comma-separated values (-c, -t, --connreqs, -R, URLs) as a table; or, with --ceiling --slo, the highest rate that meets a latency objective'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "tune" -d 'Find the bottleneck and the change to its server\'s config that answers it, shown as a diff; with --apply, write it, reload, prove it by A/B pairs under the same load, and keep it only for a significant gain (otherwise put it back)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "report" -d 'Render a Run saved with `--json` again'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "history" -d 'Runs kept with `--save`: a test\'s series with its change points (E-divisive means), `--fail-on-regression` for CI; `export` and `import` of the database'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "import" -d 'Turn a recording into a --targets file (`import har FILE`: a browser\'s HAR)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "explain" -d 'The long explanation of a finding id (mechanism, how to confirm, fixes, sources)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "doctor" -d 'Which evidence this machine gives loadlens (perf, tracefs, schedstat, cgroups, sock_diag, a server\'s threads, io_uring) and what adds noise, each with its fix'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "completions" -d 'Print shell completions for bash, zsh or fish (`make install` installs them)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "watch" -d 'Watch the server\'s machine around a load sent from elsewhere, until standard input closes; the Evidence as JSON (what `run --ray --server-node-resource` starts on the server\'s node)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "man" -d 'Print the man page (roff; `make install` installs it)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "lab" -d 'Published nginx setups with a known fault and its fix, in network namespaces (needs root)'
complete -c loadlens -n "__fish_loadlens_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s c -l connections -d 'Connections to keep open [default: 10; with --stages of connections, the highest stage\'s]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s t -l threads -d 'Worker threads [default: CPUs available to this process]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s d -l duration -d 'Length of the test, e.g. 10s, 1m [default: 10s, or unbounded with -n]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s n -l requests -d 'Stop after this many requests (responses plus failed requests), e.g. 10k' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l connreqs -d 'Requests per connection, then close and reconnect (1 = a new TCP connection per request) [default: keep-alive as long as the server allows]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s R -l rate -d 'Open loop: this many requests per second over all connections, on schedule; latency is measured from each request\'s scheduled time (corrected for coordinated omission)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l stages -d 'Change the load over the run, stage by stage (k6\'s stages): DURATION:RATE for open-loop rates (30s:100,1m:1000,30s:0) or DURATION:cN for connections (30s:c10,1m:c200). Each stage ramps linearly from the previous stage\'s target (0 before the first) to its own; the run lasts their sum. Rates take -c as the connections that carry the schedule; connections are opened and closed as the target moves' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l abort-if-behind -d 'Stop an open-loop run (-R, or --stages of rates) whose completed requests fall behind the schedule by more than P% over the last 2 s, e.g. 10%: the results so far are reported with when it stopped, the rates and the diagnosis; exit 4' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l targets -d 'A mix of requests: JSON lines (`method`, `url` — absolute or a path —, `headers`, `body` or `body_file`, `weight`, `name`) or one URL per line; `-` = standard input. Results are kept per endpoint name' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l seed -d 'Seed of the weighted order of --targets: the same seed sends the same sequence' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l replay -d 'Replay an access log (nginx/Apache combined or common format, or JSON lines `{t, method, url}`): its requests at their original relative times × --speed (open loop, latency from each request\'s due time). Requests with a body are skipped (counted)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l speed -d '--replay\'s pace: the log\'s times divided by F (2 = twice as fast), or `max` (closed loop, the log\'s order as fast as the connections go)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l json -d 'Write the Run as JSON to FILE (`-` = stdout, which silences the text output)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l flamegraph -d 'Write a flame graph of the server\'s CPU (an SVG that opens in a browser, searchable) to FILE; implies --profile' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l html -d 'Write the self-contained HTML report (charts, findings, profile) to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l repeat -d 'Run the same load N times and report each repetition and the mean with its 95% interval (for `loadlens compare`)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l pause -d 'Pause between repetitions' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l segment -d 'Run only the I-th of N shares of the load (connections, -n and -R split so the N segments add up exactly to the whole; --targets: every N-th request of the seeded order from the I-th; --replay: every N-th request of the log from the I-th, each at its own time), e.g. 2/3; `loadlens merge` adds the segments\' Runs up' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l start-at -d 'Wait until this time (seconds since the Unix epoch, at most an hour ahead) and start the load then, so segments on several machines start together' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l slo -d 'Objectives judged on the Run, comma-separated: latency percentiles, mean and max under a bound (\'p99<200ms\', \'p99.9<=1s\', \'mean<20ms\'), errors (failed and non-2xx/3xx requests) as a share or a count (\'errors<0.1%\', \'errors<10\'), \'non2xx<1%\', a rate floor (\'rps>1000\'). Exit 1 when one is broken, 3 when the evidence cannot be trusted to judge them (see EXIT STATUS)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l junit -d 'Write a JUnit XML report to FILE: a testcase per objective and per bottleneck finding' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l summary-md -d 'Write a Markdown summary (headline numbers, objectives, findings) to FILE; also appended to $GITHUB_STEP_SUMMARY when that is set' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l hdr-log -d 'Write the latency as an HdrHistogram interval log to FILE: one interval per second (µs), for HistogramLogProcessor and HdrHistogram\'s plotters' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l openmetrics -d 'Write the headline numbers, objectives and trust as OpenMetrics text to FILE (node_exporter\'s textfile collector, a Pushgateway)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l ray -d 'Run the load from the nodes of this Ray cluster (e.g. 10.0.0.1:6379, or `auto` on a node of it), one segment per node, and merge them (needs Ray installed for the Python in LOADLENS_PYTHON, or in ~/.cache/loadlens-venv)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l clients -d 'With --ray: how many nodes send load (at most the alive nodes with CPUs)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l ray-timeout -d 'With --ray: the longest wait for the segments, from their start [default: the duration (a replay\'s: its log\'s span ÷ --speed; 5 minutes with -n) plus the request timeout plus 60s]; a segment without a Run by then is reported missing' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l server-node-resource -d 'With --ray: the custom resource of the server\'s node (e.g. `server`): the machine is watched there (as `run` watches its own; the segments then do not watch theirs), and no client segment goes there' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s H -l header -d 'Add a request header, e.g. -H \'Accept-Encoding: gzip\' (repeatable)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s m -s X -l method -d 'HTTP method (`-X` as in curl)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l body -d 'Request body' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l body-file -d 'Read the request body from a file' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l timeout -d 'Per-request timeout; a request unanswered after it counts as a timeout' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l max-concurrent-streams -d 'HTTP/2 and HTTP/3: requests in flight on each connection (h2load\'s -m)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l resume -d 'HTTP/3: resume each new QUIC connection\'s TLS session from a ticket an earlier one got (`tickets`, the default of the bare flag), and send its first requests in 0-RTT early data when the server accepts them (`0rtt`). Without it every handshake is a full one. With --connreqs N, a new connection every N requests' -r -f -a "tickets\t''
0rtt\t''"
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l io -d 'Socket I/O of the workers: io_uring (one system call per loop for all connections; plain-text HTTP/1.1) or epoll. Default: io_uring where the kernel allows it, else epoll' -r -f -a "auto\t''
uring\t''
epoll\t''"
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l watch -d 'Watch the server on its own machine, over the system ssh (your config, agent and keys): loadlens copies itself there when that build is missing (~/.cache/loadlens/) and runs `loadlens watch --stdio`, e.g. ssh://root@10.0.0.2' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l ssh-command -d 'The ssh program and its options for --watch ssh:// (like rsync\'s -e), e.g. \'ssh -i KEY -o ProxyJump=bastion\'; BatchMode is added: no prompts' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l sample -d 'Sampling interval of the watch, e.g. 1s, 100ms' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l server-pid -d 'The server\'s process id (repeatable); its children are watched too. Needed when the server runs in another network namespace' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l server-name -d 'Watch the processes with this command name (repeatable), e.g. nginx, php-fpm8.2' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l profile-hz -d 'Samples per second per server thread for --profile' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l save -d 'Keep the Run in the history database under NAME (default: method, URL and load shape), for `loadlens history NAME`' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l db -d 'The history database (default: $XDG_DATA_HOME/loadlens/history.db, else ~/.local/share/loadlens/history.db)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l tag -d 'With --save: a tag kept with the Run, KEY=VALUE (repeat for more)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l sequential -d 'Send --targets in the file\'s order, round robin (weights above 0 ignored)'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l latency -d 'Print the latency percentiles, status codes and connection details'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s q -l quiet -d 'Print nothing but errors (the JSON, if asked for, is still written)'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l probe -d 'Probe when one run cannot tell causes apart (the rate could be the load\'s concurrency or a limit inside the server): short loads after the run at 1 connection and at 4× the connections, each 15% of the run (0.5-3 s), kept in the Run and cited in the findings. On by default for a closed-loop run bounded by time; off unless asked under --slo, -n, -R, --segment and --replay'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l no-probe -d 'Never probe: send nothing beyond the load asked for'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l judge-untrusted -d 'Judge the objectives even when the evidence cannot be trusted (a shared runner whose other jobs the gate would refuse): exit 1 or 0 by the objectives instead of 3, with the reason still said on stderr, in the Run and in every view (its JUnit evidence testcase skipped, not an error)'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s k -l insecure -d 'Do not verify the server\'s TLS certificate'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l h2 -d 'Speak HTTP/2: with prior knowledge over cleartext http:// (h2c), by ALPN `h2` over https:// (which already prefers HTTP/2 when the server offers it)'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l h1 -d 'Speak HTTP/1.1 only, also over https:// to a server that offers HTTP/2'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l h3 -d 'Speak HTTP/3 over QUIC (UDP) to an https:// URL: many QUIC connections (-c), each with --max-concurrent-streams requests in flight'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l no-watch -d 'Do not watch the machine (CPU, network, TCP counters, server processes)'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l profile -d 'Profile the server during the load: on-CPU call stacks of its processes (kernel perf events; needs root, CAP_PERFMON or kernel.perf_event_paranoid ≤ 1 for kernel frames), shown as "Where the server\'s CPU went" and kept in the Run'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -l no-offcpu -d 'Do not watch where the server\'s threads slept ("Where the server\'s time went"): by default their states, calls and wait channels are sampled from /proc (held to at most 1% of a core); with --profile, every context switch with its stacks'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand run" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand compare" -l json -d 'Also write the comparison as JSON to FILE (`-` = stdout, which silences the text)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand compare" -l html -d 'Write the comparison as a self-contained HTML page to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand compare" -l fail-if-slower -d 'Exit 1 when a later run is significantly slower than the first by more than PCT percent: fewer requests/s, or a higher p99 (for CI). A gate: exit 3 instead, with the reason, when a Run\'s evidence cannot be trusted (a saturated client, another busy process, a missing segment)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand compare" -l judge-untrusted -d 'With --fail-if-slower: judge even Runs whose evidence cannot be trusted (a shared runner), exit 1 or 0 by the comparison, the reason a warning on stderr'
complete -c loadlens -n "__fish_loadlens_using_subcommand compare" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c loadlens -n "__fish_loadlens_using_subcommand compare" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l json -d 'Write the Run as JSON to FILE (`-` = stdout, which silences the text)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l html -d 'Write the Run as a self-contained HTML page to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l slo -d 'Objectives judged on the Run, comma-separated: latency percentiles, mean and max under a bound (\'p99<200ms\', \'p99.9<=1s\', \'mean<20ms\'), errors (failed and non-2xx/3xx requests) as a share or a count (\'errors<0.1%\', \'errors<10\'), \'non2xx<1%\', a rate floor (\'rps>1000\'). Exit 1 when one is broken, 3 when the evidence cannot be trusted to judge them (see EXIT STATUS)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l junit -d 'Write a JUnit XML report to FILE: a testcase per objective and per bottleneck finding' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l summary-md -d 'Write a Markdown summary (headline numbers, objectives, findings) to FILE; also appended to $GITHUB_STEP_SUMMARY when that is set' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l hdr-log -d 'Write the latency as an HdrHistogram interval log to FILE: one interval per second (µs), for HistogramLogProcessor and HdrHistogram\'s plotters' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l openmetrics -d 'Write the headline numbers, objectives and trust as OpenMetrics text to FILE (node_exporter\'s textfile collector, a Pushgateway)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l save -d 'Keep the Run in the history database under NAME (default: method, URL and load shape), for `loadlens history NAME`' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l db -d 'The history database (default: $XDG_DATA_HOME/loadlens/history.db, else ~/.local/share/loadlens/history.db)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l tag -d 'With --save: a tag kept with the Run, KEY=VALUE (repeat for more)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l latency -d 'Print the latency percentiles and details'
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -l judge-untrusted -d 'Judge the objectives even when the evidence cannot be trusted (a shared runner whose other jobs the gate would refuse): exit 1 or 0 by the objectives instead of 3, with the reason still said on stderr, in the Run and in every view (its JUnit evidence testcase skipped, not an error)'
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand merge" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l json -d 'Write the Run as JSON to FILE (`-` = stdout, which silences the text)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l html -d 'Write the Run as a self-contained HTML page to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l slo -d 'Objectives judged on the Run, comma-separated: latency percentiles, mean and max under a bound (\'p99<200ms\', \'p99.9<=1s\', \'mean<20ms\'), errors (failed and non-2xx/3xx requests) as a share or a count (\'errors<0.1%\', \'errors<10\'), \'non2xx<1%\', a rate floor (\'rps>1000\'). Exit 1 when one is broken, 3 when the evidence cannot be trusted to judge them (see EXIT STATUS)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l junit -d 'Write a JUnit XML report to FILE: a testcase per objective and per bottleneck finding' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l summary-md -d 'Write a Markdown summary (headline numbers, objectives, findings) to FILE; also appended to $GITHUB_STEP_SUMMARY when that is set' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l hdr-log -d 'Write the latency as an HdrHistogram interval log to FILE: one interval per second (µs), for HistogramLogProcessor and HdrHistogram\'s plotters' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l openmetrics -d 'Write the headline numbers, objectives and trust as OpenMetrics text to FILE (node_exporter\'s textfile collector, a Pushgateway)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l latency -d 'Print the latency percentiles and details'
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -l judge-untrusted -d 'Judge the objectives even when the evidence cannot be trusted (a shared runner whose other jobs the gate would refuse): exit 1 or 0 by the objectives instead of 3, with the reason still said on stderr, in the Run and in every view (its JUnit evidence testcase skipped, not an error)'
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand attach" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s c -l connections -d 'Connections, e.g. 10,50,100' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s t -l threads -d 'Worker threads, e.g. 1,2 [default: CPUs available to this process]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l connreqs -d 'Requests per connection, e.g. 1,4,14,keep-alive [default: keep-alive]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s R -l rate -d 'Open-loop rates, requests/s over all connections, e.g. 1k,2k,4k [default: closed loop]. With --ceiling the rates are searched instead' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s d -l duration -d 'Length of each cell\'s load [default: 5s; with --replay, the log\'s requests, as long as they take]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l repeat -d 'Repeat each cell N times (the cell\'s Run holds every repetition)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l pause -d 'Pause between loads, so TIME_WAIT and queues settle the same way before each' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l slo -d 'The objectives of --ceiling, in `run --slo`\'s grammar, at least one about latency: e.g. \'p99<200ms\', \'p99.9<=1s,max<500ms\', \'p99<200ms,errors<0.1%\'' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l errors -d 'The error budget of --ceiling: the share of failed or non-2xx/3xx requests allowed, e.g. \'<0.1%\' (the objective `errors<0.1%`; a bare \'0.1%\' is `<=`)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l budget -d 'Total time the --ceiling search may take; it never starts a load that would not fit' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l json -d 'Write the study (every cell\'s Run) as JSON to FILE (`-` = stdout)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l csv -d 'Write one CSV line per cell to FILE (`-` = stdout)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l html -d 'Write the study as a self-contained HTML page (the curve and the table) to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l targets -d 'A mix of requests: JSON lines (`method`, `url` — absolute or a path —, `headers`, `body` or `body_file`, `weight`, `name`) or one URL per line; `-` = standard input. Results are kept per endpoint name' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l seed -d 'Seed of the weighted order of --targets: the same seed sends the same sequence' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l replay -d 'Replay an access log (nginx/Apache combined or common format, or JSON lines `{t, method, url}`): its requests at their original relative times × --speed (open loop, latency from each request\'s due time). Requests with a body are skipped (counted)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l speed -d '--replay\'s pace: the log\'s times divided by F (2 = twice as fast), or `max` (closed loop, the log\'s order as fast as the connections go)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s H -l header -d 'Add a request header, e.g. -H \'Accept-Encoding: gzip\' (repeatable)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s m -s X -l method -d 'HTTP method (`-X` as in curl)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l body -d 'Request body' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l body-file -d 'Read the request body from a file' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l timeout -d 'Per-request timeout; a request unanswered after it counts as a timeout' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l max-concurrent-streams -d 'HTTP/2 and HTTP/3: requests in flight on each connection (h2load\'s -m)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l resume -d 'HTTP/3: resume each new QUIC connection\'s TLS session from a ticket an earlier one got (`tickets`, the default of the bare flag), and send its first requests in 0-RTT early data when the server accepts them (`0rtt`). Without it every handshake is a full one. With --connreqs N, a new connection every N requests' -r -f -a "tickets\t''
0rtt\t''"
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l io -d 'Socket I/O of the workers: io_uring (one system call per loop for all connections; plain-text HTTP/1.1) or epoll. Default: io_uring where the kernel allows it, else epoll' -r -f -a "auto\t''
uring\t''
epoll\t''"
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l watch -d 'Watch the server on its own machine, over the system ssh (your config, agent and keys): loadlens copies itself there when that build is missing (~/.cache/loadlens/) and runs `loadlens watch --stdio`, e.g. ssh://root@10.0.0.2' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l ssh-command -d 'The ssh program and its options for --watch ssh:// (like rsync\'s -e), e.g. \'ssh -i KEY -o ProxyJump=bastion\'; BatchMode is added: no prompts' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l sample -d 'Sampling interval of the watch, e.g. 1s, 100ms' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l server-pid -d 'The server\'s process id (repeatable); its children are watched too. Needed when the server runs in another network namespace' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l server-name -d 'Watch the processes with this command name (repeatable), e.g. nginx, php-fpm8.2' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l profile-hz -d 'Samples per second per server thread for --profile' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l ceiling -d 'Find the highest open-loop rate that meets --slo (and --errors): a closed-loop probe, then rates that climb and bisect'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s q -l quiet -d 'Print nothing but errors (the files asked for are still written)'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l sequential -d 'Send --targets in the file\'s order, round robin (weights above 0 ignored)'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s k -l insecure -d 'Do not verify the server\'s TLS certificate'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l h2 -d 'Speak HTTP/2: with prior knowledge over cleartext http:// (h2c), by ALPN `h2` over https:// (which already prefers HTTP/2 when the server offers it)'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l h1 -d 'Speak HTTP/1.1 only, also over https:// to a server that offers HTTP/2'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l h3 -d 'Speak HTTP/3 over QUIC (UDP) to an https:// URL: many QUIC connections (-c), each with --max-concurrent-streams requests in flight'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l no-watch -d 'Do not watch the machine (CPU, network, TCP counters, server processes)'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l profile -d 'Profile the server during the load: on-CPU call stacks of its processes (kernel perf events; needs root, CAP_PERFMON or kernel.perf_event_paranoid ≤ 1 for kernel frames), shown as "Where the server\'s CPU went" and kept in the Run'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -l no-offcpu -d 'Do not watch where the server\'s threads slept ("Where the server\'s time went"): by default their states, calls and wait channels are sampled from /proc (held to at most 1% of a core); with --profile, every context switch with its stacks'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand sweep" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s c -l connections -d 'Connections to keep open [default: 10; with --stages of connections, the highest stage\'s]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s t -l threads -d 'Worker threads [default: CPUs available to this process]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s d -l duration -d 'Length of the test, e.g. 10s, 1m [default: 10s, or unbounded with -n]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s n -l requests -d 'Stop after this many requests (responses plus failed requests), e.g. 10k' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l connreqs -d 'Requests per connection, then close and reconnect (1 = a new TCP connection per request) [default: keep-alive as long as the server allows]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s R -l rate -d 'Open loop: this many requests per second over all connections, on schedule; latency is measured from each request\'s scheduled time (corrected for coordinated omission)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l stages -d 'Change the load over the run, stage by stage (k6\'s stages): DURATION:RATE for open-loop rates (30s:100,1m:1000,30s:0) or DURATION:cN for connections (30s:c10,1m:c200). Each stage ramps linearly from the previous stage\'s target (0 before the first) to its own; the run lasts their sum. Rates take -c as the connections that carry the schedule; connections are opened and closed as the target moves' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l abort-if-behind -d 'Stop an open-loop run (-R, or --stages of rates) whose completed requests fall behind the schedule by more than P% over the last 2 s, e.g. 10%: the results so far are reported with when it stopped, the rates and the diagnosis; exit 4' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l targets -d 'A mix of requests: JSON lines (`method`, `url` — absolute or a path —, `headers`, `body` or `body_file`, `weight`, `name`) or one URL per line; `-` = standard input. Results are kept per endpoint name' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l seed -d 'Seed of the weighted order of --targets: the same seed sends the same sequence' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l replay -d 'Replay an access log (nginx/Apache combined or common format, or JSON lines `{t, method, url}`): its requests at their original relative times × --speed (open loop, latency from each request\'s due time). Requests with a body are skipped (counted)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l speed -d '--replay\'s pace: the log\'s times divided by F (2 = twice as fast), or `max` (closed loop, the log\'s order as fast as the connections go)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l json -d 'Write the Run as JSON to FILE (`-` = stdout, which silences the text output)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l flamegraph -d 'Write a flame graph of the server\'s CPU (an SVG that opens in a browser, searchable) to FILE; implies --profile' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l html -d 'Write the self-contained HTML report (charts, findings, profile) to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l repeat -d 'Run the same load N times and report each repetition and the mean with its 95% interval (for `loadlens compare`)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l pause -d 'Pause between repetitions' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l segment -d 'Run only the I-th of N shares of the load (connections, -n and -R split so the N segments add up exactly to the whole; --targets: every N-th request of the seeded order from the I-th; --replay: every N-th request of the log from the I-th, each at its own time), e.g. 2/3; `loadlens merge` adds the segments\' Runs up' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l start-at -d 'Wait until this time (seconds since the Unix epoch, at most an hour ahead) and start the load then, so segments on several machines start together' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l slo -d 'Objectives judged on the Run, comma-separated: latency percentiles, mean and max under a bound (\'p99<200ms\', \'p99.9<=1s\', \'mean<20ms\'), errors (failed and non-2xx/3xx requests) as a share or a count (\'errors<0.1%\', \'errors<10\'), \'non2xx<1%\', a rate floor (\'rps>1000\'). Exit 1 when one is broken, 3 when the evidence cannot be trusted to judge them (see EXIT STATUS)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l junit -d 'Write a JUnit XML report to FILE: a testcase per objective and per bottleneck finding' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l summary-md -d 'Write a Markdown summary (headline numbers, objectives, findings) to FILE; also appended to $GITHUB_STEP_SUMMARY when that is set' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l hdr-log -d 'Write the latency as an HdrHistogram interval log to FILE: one interval per second (µs), for HistogramLogProcessor and HdrHistogram\'s plotters' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l openmetrics -d 'Write the headline numbers, objectives and trust as OpenMetrics text to FILE (node_exporter\'s textfile collector, a Pushgateway)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l ray -d 'Run the load from the nodes of this Ray cluster (e.g. 10.0.0.1:6379, or `auto` on a node of it), one segment per node, and merge them (needs Ray installed for the Python in LOADLENS_PYTHON, or in ~/.cache/loadlens-venv)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l clients -d 'With --ray: how many nodes send load (at most the alive nodes with CPUs)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l ray-timeout -d 'With --ray: the longest wait for the segments, from their start [default: the duration (a replay\'s: its log\'s span ÷ --speed; 5 minutes with -n) plus the request timeout plus 60s]; a segment without a Run by then is reported missing' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l server-node-resource -d 'With --ray: the custom resource of the server\'s node (e.g. `server`): the machine is watched there (as `run` watches its own; the segments then do not watch theirs), and no client segment goes there' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s H -l header -d 'Add a request header, e.g. -H \'Accept-Encoding: gzip\' (repeatable)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s m -s X -l method -d 'HTTP method (`-X` as in curl)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l body -d 'Request body' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l body-file -d 'Read the request body from a file' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l timeout -d 'Per-request timeout; a request unanswered after it counts as a timeout' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l max-concurrent-streams -d 'HTTP/2 and HTTP/3: requests in flight on each connection (h2load\'s -m)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l resume -d 'HTTP/3: resume each new QUIC connection\'s TLS session from a ticket an earlier one got (`tickets`, the default of the bare flag), and send its first requests in 0-RTT early data when the server accepts them (`0rtt`). Without it every handshake is a full one. With --connreqs N, a new connection every N requests' -r -f -a "tickets\t''
0rtt\t''"
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l io -d 'Socket I/O of the workers: io_uring (one system call per loop for all connections; plain-text HTTP/1.1) or epoll. Default: io_uring where the kernel allows it, else epoll' -r -f -a "auto\t''
uring\t''
epoll\t''"
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l watch -d 'Watch the server on its own machine, over the system ssh (your config, agent and keys): loadlens copies itself there when that build is missing (~/.cache/loadlens/) and runs `loadlens watch --stdio`, e.g. ssh://root@10.0.0.2' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l ssh-command -d 'The ssh program and its options for --watch ssh:// (like rsync\'s -e), e.g. \'ssh -i KEY -o ProxyJump=bastion\'; BatchMode is added: no prompts' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l sample -d 'Sampling interval of the watch, e.g. 1s, 100ms' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l server-pid -d 'The server\'s process id (repeatable); its children are watched too. Needed when the server runs in another network namespace' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l server-name -d 'Watch the processes with this command name (repeatable), e.g. nginx, php-fpm8.2' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l profile-hz -d 'Samples per second per server thread for --profile' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l save -d 'Keep the Run in the history database under NAME (default: method, URL and load shape), for `loadlens history NAME`' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l db -d 'The history database (default: $XDG_DATA_HOME/loadlens/history.db, else ~/.local/share/loadlens/history.db)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l tag -d 'With --save: a tag kept with the Run, KEY=VALUE (repeat for more)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l pairs -d 'A/B pairs per change (old, new, …), at least 5' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l steps -d 'Changes to try, one after the other, each from the diagnosis of the config as it is then' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l objective -d 'What a load is judged by: throughput (2xx/3xx responses per second), rps, p99 (lower is better), or an objective such as \'p99<200ms\'' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l min-gain -d 'The smallest gain kept, percent: the 95% interval\'s lower end must be above it' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l try -d 'Try this change instead of the diagnosis\'s, e.g. \'proxy_buffers 8 64k\' (a directive already written in the server\'s config)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l patch-out -d 'Write the kept changes as one patch (unified diff) to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l sequential -d 'Send --targets in the file\'s order, round robin (weights above 0 ignored)'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l latency -d 'Print the latency percentiles, status codes and connection details'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s q -l quiet -d 'Print nothing but errors (the JSON, if asked for, is still written)'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l probe -d 'Probe when one run cannot tell causes apart (the rate could be the load\'s concurrency or a limit inside the server): short loads after the run at 1 connection and at 4× the connections, each 15% of the run (0.5-3 s), kept in the Run and cited in the findings. On by default for a closed-loop run bounded by time; off unless asked under --slo, -n, -R, --segment and --replay'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l no-probe -d 'Never probe: send nothing beyond the load asked for'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l judge-untrusted -d 'Judge the objectives even when the evidence cannot be trusted (a shared runner whose other jobs the gate would refuse): exit 1 or 0 by the objectives instead of 3, with the reason still said on stderr, in the Run and in every view (its JUnit evidence testcase skipped, not an error)'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s k -l insecure -d 'Do not verify the server\'s TLS certificate'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l h2 -d 'Speak HTTP/2: with prior knowledge over cleartext http:// (h2c), by ALPN `h2` over https:// (which already prefers HTTP/2 when the server offers it)'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l h1 -d 'Speak HTTP/1.1 only, also over https:// to a server that offers HTTP/2'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l h3 -d 'Speak HTTP/3 over QUIC (UDP) to an https:// URL: many QUIC connections (-c), each with --max-concurrent-streams requests in flight'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l no-watch -d 'Do not watch the machine (CPU, network, TCP counters, server processes)'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l profile -d 'Profile the server during the load: on-CPU call stacks of its processes (kernel perf events; needs root, CAP_PERFMON or kernel.perf_event_paranoid ≤ 1 for kernel frames), shown as "Where the server\'s CPU went" and kept in the Run'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l no-offcpu -d 'Do not watch where the server\'s threads slept ("Where the server\'s time went"): by default their states, calls and wait channels are sampled from /proc (held to at most 1% of a core); with --profile, every context switch with its stacks'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l apply -d 'Write the change, test and reload the server, prove it by A/B pairs, keep it or put it back (without it: a dry run that writes nothing)'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -l allow-sysctl -d 'Allow changing sysctls (in the server\'s network namespace) when a change needs one; a kept one stays, and how to put it back is printed'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand tune" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l html -d 'Write the self-contained HTML report to FILE instead of printing the text' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l slo -d 'Objectives judged on the Run, comma-separated: latency percentiles, mean and max under a bound (\'p99<200ms\', \'p99.9<=1s\', \'mean<20ms\'), errors (failed and non-2xx/3xx requests) as a share or a count (\'errors<0.1%\', \'errors<10\'), \'non2xx<1%\', a rate floor (\'rps>1000\'). Exit 1 when one is broken, 3 when the evidence cannot be trusted to judge them (see EXIT STATUS)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l junit -d 'Write a JUnit XML report to FILE: a testcase per objective and per bottleneck finding' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l summary-md -d 'Write a Markdown summary (headline numbers, objectives, findings) to FILE; also appended to $GITHUB_STEP_SUMMARY when that is set' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l hdr-log -d 'Write the latency as an HdrHistogram interval log to FILE: one interval per second (µs), for HistogramLogProcessor and HdrHistogram\'s plotters' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l openmetrics -d 'Write the headline numbers, objectives and trust as OpenMetrics text to FILE (node_exporter\'s textfile collector, a Pushgateway)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l save -d 'Keep the Run in the history database under NAME (default: method, URL and load shape), for `loadlens history NAME`' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l db -d 'The history database (default: $XDG_DATA_HOME/loadlens/history.db, else ~/.local/share/loadlens/history.db)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l tag -d 'With --save: a tag kept with the Run, KEY=VALUE (repeat for more)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l latency -d 'Print the latency percentiles and details'
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -l judge-untrusted -d 'Judge the objectives even when the evidence cannot be trusted (a shared runner whose other jobs the gate would refuse): exit 1 or 0 by the objectives instead of 3, with the reason still said on stderr, in the Run and in every view (its JUnit evidence testcase skipped, not an error)'
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand report" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l db -d 'The history database (default: $XDG_DATA_HOME/loadlens/history.db)' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l threshold -d 'The change, in percent, below which a regression does not fail' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l max-p -d 'A change point is kept when its permutation test\'s p-value is below this' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l min-change -d 'A change point whose segments\' means differ by less than this, percent, is not kept (Otava\'s min magnitude): pure noise splits significantly about --max-p of the time however small it is' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l seed -d 'The seed of the permutations (the same seed, the same change points)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l html -d 'Write the series as a self-contained HTML page to FILE: the trends of requests/s, p50/p99/max and the server\'s CPU per request, each change point marked and linked to the two Runs it separates' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l junit -d 'Write a JUnit XML report to FILE: a testcase per number, a failure for each regression beyond --threshold at the newest Run\'s segment' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l summary-md -d 'Write a Markdown summary (the verdict, the newest Run\'s numbers, the change points and how to compare their Runs) to FILE; also appended to $GITHUB_STEP_SUMMARY when that is set' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l all-machines -d 'Compare Runs of every machine, not only those of the newest Run\'s machine'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l fail-on-regression -d 'Exit 1 when the newest Run is in a segment that began with a regression (a change point that made a number worse by more than --threshold)'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -l json -d 'Print the series and change points as JSON'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -a "export" -d 'Write the stored Runs in a dashboard\'s format to standard output'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -a "show" -d 'Write a stored Run\'s JSON (as `run --json` wrote it) to standard output, for `loadlens compare` or `loadlens report`; the ids are in `history NAME --json` and the HTML page'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -a "import" -d 'Add the Runs of another history database (another runner\'s); those already here are skipped'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and not __fish_seen_subcommand_from export show import help" -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from export" -l format -d 'bmf: Bencher Metric Format; gab: github-action-benchmark customSmallerIsBetter; csv: Apache Otava\'s CSV' -r -f -a "bmf\t'Bencher Metric Format JSON'
gab\t'github-action-benchmark\'s customSmallerIsBetter JSON'
csv\t'Apache Otava\'s CSV'"
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from export" -l db -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from export" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from show" -l db -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from import" -l db -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from import" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from import" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "export" -d 'Write the stored Runs in a dashboard\'s format to standard output'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "show" -d 'Write a stored Run\'s JSON (as `run --json` wrote it) to standard output, for `loadlens compare` or `loadlens report`; the ids are in `history NAME --json` and the HTML page'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "import" -d 'Add the Runs of another history database (another runner\'s); those already here are skipped'
complete -c loadlens -n "__fish_loadlens_using_subcommand history; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and not __fish_seen_subcommand_from har help" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and not __fish_seen_subcommand_from har help" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and not __fish_seen_subcommand_from har help" -f -a "har" -d 'A HAR file (the browser\'s network panel, "Save all as HAR") as a --targets file: one JSON line per request with its method, URL, headers (less Host, Content-Length, connection and HTTP/2 pseudo-headers) and body'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and not __fish_seen_subcommand_from har help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and __fish_seen_subcommand_from har" -s o -l output -d 'Write the targets to OUT (`-` = standard output, the default)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and __fish_seen_subcommand_from har" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and __fish_seen_subcommand_from har" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "har" -d 'A HAR file (the browser\'s network panel, "Save all as HAR") as a --targets file: one JSON line per request with its method, URL, headers (less Host, Content-Length, connection and HTTP/2 pseudo-headers) and body'
complete -c loadlens -n "__fish_loadlens_using_subcommand import; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand explain" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand explain" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand doctor" -l pid -d 'A server\'s pid: check that its threads and open files can be read (the off-CPU watch and the discovery need them)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand completions" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand completions" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l start-at -d 'Start watching a second before this time (seconds since the Unix epoch)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l max-duration -d 'Stop at the latest after this long, even if standard input stays open' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l duration -d 'Watch alone for this long, not until standard input closes (a server the client cannot reach: start it before the load, end it after, then `loadlens attach RUN.json WATCH.json`)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l json -d 'Write the Evidence as JSON to FILE (`-` = stdout)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l sample -d 'Sampling interval' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l server-name -d 'Watch the processes with this command name (repeatable)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l profile-hz -d 'Profile the server at this many samples per second' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -l stdio -d 'Speak the watch protocol on standard input and output (`run --watch ssh://…`): the URL, interval and profile come in its start message; exits when standard input closes, or after --max-duration'
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand watch" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand man" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand man" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and not __fish_seen_subcommand_from list run tune shell help" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and not __fish_seen_subcommand_from list run tune shell help" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and not __fish_seen_subcommand_from list run tune shell help" -f -a "list" -d 'List the scenarios'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and not __fish_seen_subcommand_from list run tune shell help" -f -a "run" -d 'Build a scenario\'s world, load it, and with --fix show before/after'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and not __fish_seen_subcommand_from list run tune shell help" -f -a "tune" -d 'Build a scenario\'s fault and run `loadlens tune --apply` against it: it must find, apply and keep the scenario\'s own fix (or, with --try, revert a decoy)'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and not __fish_seen_subcommand_from list run tune shell help" -f -a "shell" -d 'Build a scenario\'s world and open a shell in its client namespace'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and not __fish_seen_subcommand_from list run tune shell help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -s d -l duration -d 'Length of each load run' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -l json-dir -d 'Save each Run as DIR/<scenario>-before.json and -after.json' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -l param -d 'A parameter of the scenario\'s fault, e.g. `--param threads=2` (thread-pool); each scenario takes its own, within the range where its fault is decisive (`loadlens lab list`). Repeatable' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -l fix -d 'Apply the fix and run again: before/after table'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -l keep -d 'Keep the world after each run until Enter is pressed'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -s v -l verbose -d 'Show the ip/tc/sysctl commands that build the world'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -s q -l quiet -d 'Print only the before/after table, not each run\'s report'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -l no-profile -d 'Do not profile the server (the lab profiles it by default; with --json-dir the flame graphs are saved there as <scenario>-before.svg and -after.svg)'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -l no-offcpu -d 'Do not watch where the server\'s threads slept (the off-CPU watch: the context switches when the server is profiled, its threads\' states sampled otherwise)'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -l watch-ssh -d 'Watch the server over ssh, as a server on another machine is (`run --watch ssh://`): an sshd of the world\'s own, with keys of its own, runs in the server namespace'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from run" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -s d -l duration -d 'Length of each load (the baseline and each side of each pair)' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -l try -d 'Try this change instead of the diagnosis\'s (a decoy), e.g. \'proxy_buffers 8 64k\'' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -l pairs -d 'A/B pairs per change' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -l json -d 'Write the tune session\'s Run as JSON to FILE' -r -F
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -l objective -d 'What each load is judged by (tune\'s --objective) [default: the one that measures the scenario\'s fault: \'errors<1%\' for a connection or open-files limit, throughput otherwise]' -r
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -l dry-run -d 'Without --apply: show the change, write nothing'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -l watch-ssh -d 'Tune over ssh, as a server on another machine is (`tune --watch ssh://`): an sshd of the world\'s own, with keys of its own, runs in the server namespace, and the config is read, changed, tested and reloaded through it'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -s v -l verbose -d 'Show the ip/tc/sysctl commands that build the world'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from tune" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from shell" -s v -l verbose -d 'Show the ip/tc/sysctl commands that build the world'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from shell" -s h -l help -d 'Print help'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from shell" -s V -l version -d 'Print version'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the scenarios'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "run" -d 'Build a scenario\'s world, load it, and with --fix show before/after'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "tune" -d 'Build a scenario\'s fault and run `loadlens tune --apply` against it: it must find, apply and keep the scenario\'s own fix (or, with --try, revert a decoy)'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "shell" -d 'Build a scenario\'s world and open a shell in its client namespace'
complete -c loadlens -n "__fish_loadlens_using_subcommand lab; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "run" -d 'Load-test a URL and report throughput, latency and errors'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "compare" -d 'Compare saved Runs: the numbers side by side, each change with a verdict (significant / not significant / not enough data)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "merge" -d 'Merge the segment Runs of a load split over machines (`run --segment I/N`) into the Run of the whole load: counts summed, histograms added, findings recomputed'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "attach" -d 'Join a Run made without a watch to a watch run alone on the server (`loadlens watch URL --duration D --json FILE`), by wall clock, and diagnose it again'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "sweep" -d 'A study in one command: the cross product of comma-separated values (-c, -t, --connreqs, -R, URLs) as a table; or, with --ceiling --slo, the highest rate that meets a latency objective'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "tune" -d 'Find the bottleneck and the change to its server\'s config that answers it, shown as a diff; with --apply, write it, reload, prove it by A/B pairs under the same load, and keep it only for a significant gain (otherwise put it back)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "report" -d 'Render a Run saved with `--json` again'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "history" -d 'Runs kept with `--save`: a test\'s series with its change points (E-divisive means), `--fail-on-regression` for CI; `export` and `import` of the database'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "import" -d 'Turn a recording into a --targets file (`import har FILE`: a browser\'s HAR)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "explain" -d 'The long explanation of a finding id (mechanism, how to confirm, fixes, sources)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "doctor" -d 'Which evidence this machine gives loadlens (perf, tracefs, schedstat, cgroups, sock_diag, a server\'s threads, io_uring) and what adds noise, each with its fix'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "completions" -d 'Print shell completions for bash, zsh or fish (`make install` installs them)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "watch" -d 'Watch the server\'s machine around a load sent from elsewhere, until standard input closes; the Evidence as JSON (what `run --ray --server-node-resource` starts on the server\'s node)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "man" -d 'Print the man page (roff; `make install` installs it)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "lab" -d 'Published nginx setups with a known fault and its fix, in network namespaces (needs root)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and not __fish_seen_subcommand_from run compare merge attach sweep tune report history import explain doctor completions watch man lab help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from history" -f -a "export" -d 'Write the stored Runs in a dashboard\'s format to standard output'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from history" -f -a "show" -d 'Write a stored Run\'s JSON (as `run --json` wrote it) to standard output, for `loadlens compare` or `loadlens report`; the ids are in `history NAME --json` and the HTML page'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from history" -f -a "import" -d 'Add the Runs of another history database (another runner\'s); those already here are skipped'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from import" -f -a "har" -d 'A HAR file (the browser\'s network panel, "Save all as HAR") as a --targets file: one JSON line per request with its method, URL, headers (less Host, Content-Length, connection and HTTP/2 pseudo-headers) and body'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "list" -d 'List the scenarios'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "run" -d 'Build a scenario\'s world, load it, and with --fix show before/after'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "tune" -d 'Build a scenario\'s fault and run `loadlens tune --apply` against it: it must find, apply and keep the scenario\'s own fix (or, with --try, revert a decoy)'
complete -c loadlens -n "__fish_loadlens_using_subcommand help; and __fish_seen_subcommand_from lab" -f -a "shell" -d 'Build a scenario\'s world and open a shell in its client namespace'
