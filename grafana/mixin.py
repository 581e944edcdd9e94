#!/usr/bin/env python3
"""soakd's monitoring mixin: the source of dashboards/soakd.json, rules.yml
and alerts.yml, which this script writes (standard library only).

    python3 grafana/mixin.py           rewrite the three files
    python3 grafana/mixin.py --check   exit 1, naming the stale files, when
                                       they differ from what would be written

The job selector and every alert threshold are in CONFIG below; the
dashboard, the rules and the alerts all read them from there. Panel titles
and descriptions, and every field of the rule files, are %-format strings
over CONFIG and the forms derived from it (see derived()): write %% for a
literal %. JSON has no comments, so the dashboard carries no "generated"
note; grafana/README.md says it.
"""

import argparse
import difflib
import json
import os
import re
import sys
import textwrap

# ---------------------------------------------------------------------------
# CONFIG: the one place to change the job selector or a threshold. Then run
# `python3 grafana/mixin.py`, update the expected values in tests/ and run
# `promtool test rules grafana/tests/*.yml`.
# ---------------------------------------------------------------------------
CONFIG = {
    # soakd's scrape jobs, for the metrics that do not start with soakd_
    # (up, process_*): SoakdDown, SoakdFdsNearLimit and the dashboard's Job
    # list. The second entry is how the alert texts say it.
    'job_selector': 'job=~".*soakd.*"',
    'job_selector_text': 'a job whose name contains "soakd"',
    # SoakdLatencyAboveSLO: p99 request latency over 5m, in seconds. 0.25 is
    # a bucket boundary; between boundaries the p99 is interpolated
    # (docs/metrics.md, "Histogram buckets").
    'latency_slo': 0.25,
    'latency_slo_for': '5m',
    # SoakdLatencyAboveDayAgo: p99 over 10m above factor x the same 10m one
    # day earlier, and above floor (seconds).
    'day_ago_factor': 1.25,
    'day_ago_floor': 0.005,
    'day_ago_for': '10m',
    # SoakdLatencyRegression, SoakdThroughputRegression (soakd run
    # --baseline): soakd's own verdict of its --baseline-window against the
    # baseline (compare's rules: tolerance, floors, the rank test, the
    # generator-lag excuse) says worse, held this long.
    'baseline_for': '10m',
    # SoakdErrorRatioHigh: errors / (errors + responses) over 5m.
    'error_ratio': 0.01,
    'error_ratio_for': '5m',
    # SoakdCheckFailures: responses of one request that fail a configured
    # check (status, header, body, size) / its responses, over 5m.
    'check_ratio': 0.01,
    'check_for': '5m',
    # SoakdConnectionsBelowDesired: open / desired connections.
    'connections_ratio': 0.95,
    'connections_for': '5m',
    # SoakdGeneratorSaturated: schedule lag p99 over 5m, in seconds; above
    # it soakd's latency figures are not trustworthy. lag_warning only
    # colours the dashboard's stat orange.
    'lag_warning': 0.005,
    'lag_max': 0.01,
    'lag_for': '5m',
    # SoakdThresholdFailing: a --threshold has been failing (over its
    # --threshold-window) this long.
    'threshold_for': '5m',
    # SoakdDown, SoakdWatchdogFailing.
    'down_for': '2m',
    'watchdog_for': '1m',
    # SoakdFdsNearLimit: open fds / the open-file limit.
    'fds_ratio': 0.9,
    'fds_for': '5m',
    # SoakdTargetMemoryGrowing: the server's resident memory (--target-pid)
    # grew faster than this many bytes per hour over the last hour (deriv)
    # and really grew by half of it (offset 1h), for this long. 10 MiB/h,
    # the limit docs/verdicts.md suggests for target_rss_slope.
    'memory_growth_per_hour': 10485760,
    'memory_growth_for': '30m',
    # SoakdServerLeak: a series of the server watch (--target-metrics,
    # --prometheus, --target-pidfile, --target-cgroup) has a significant
    # slope (soakd's own Theil-Sen and Mann-Kendall over the steady part)
    # of more than this share of its value per hour, for this long: unitless,
    # so one rule covers memory, descriptors, goroutines and GC time.
    'server_growth_ratio_per_hour': 0.01,
    'server_growth_for': '30m',
    # SoakdLatencyDrifting: p99 over 10m above factor x the same 10m one
    # hour earlier, and above floor (seconds): the live side of p99_drift.
    'drift_factor': 1.2,
    'drift_floor': 0.005,
    'drift_for': '30m',
    # WebSocket. SoakdWebSocketsLost: sockets the servers closed per minute
    # (any code, averaged over 5m), as a fraction of the sockets open, for
    # this long: 0.01 is 1 % of the held sockets lost every minute.
    'ws_lost_ratio_per_min': 0.01,
    'ws_lost_for': '10m',
    # HTTP/2
    # SoakdH2GoawayError: a server sent GOAWAY with an error code (anything
    # but NO_ERROR, the graceful one) in the last 5m, for this long. Graceful
    # GOAWAYs are the weather (load balancers send them routinely); one with
    # an error code means the server gave up on the connection.
    'goaway_error_for': '1m',
    # gRPC. SoakdGrpcErrorRatio: the share of a method's calls ending with
    # a status other than OK over 5m, above this, for this long (a rising
    # ratio crosses it; the grpc_error_rate threshold is the run's own).
    'grpc_error_ratio': 0.01,
    'grpc_error_ratio_for': '10m',
    # Outages (issue 30). SoakdOutage: soakd found the target in an outage
    # (soakd_outage_active; its own rules: --outage-errors, --outage-open,
    # --outage-settle) for this long. SoakdEventFailed: an event's command
    # (a deploy soakd ran) did not exit 0.
    'outage_for': '1m',
}


def derived(config):
    """CONFIG plus the forms texts use: for a number x, x_pct ('1 %') and
    x_ms (x seconds, '10 ms'); for a duration d ('5m'), d_words
    ('5 minutes')."""
    units = {'s': 'second', 'm': 'minute', 'h': 'hour', 'd': 'day'}
    out = dict(config)
    for key, value in config.items():
        if isinstance(value, (int, float)):
            out[key + '_pct'] = '%g %%' % (value * 100)
            out[key + '_ms'] = '%g ms' % (value * 1000)
        elif re.fullmatch(r'\d+[smhd]', value):
            n, unit = int(value[:-1]), units[value[-1]]
            out[key + '_words'] = '%d %s%s' % (n, unit, '' if n == 1 else 's')
    return out


V = derived(CONFIG)


def prose(text):
    """A text written over several source lines as one line, filled in."""
    return ' '.join(text.split()) % V


# ---------------------------------------------------------------------------
# Dashboard helpers
# ---------------------------------------------------------------------------
DS = {'type': 'prometheus', 'uid': '${datasource}'}
# Recording-rule panels (all instances of the job summed) and per-instance
# panels.
T = 'job=~"$job",target=~"$target"'
I = 'job=~"$job",instance=~"$instance"'
IT = I + ',target=~"$target"'
SUMMED = (' Summed over all soakd instances of the job (the instance selector'
          ' does not apply): several daemons loading one target show as one'
          ' soak.')
WATCHED = ('Only when soakd runs with --target-pid PID (empty otherwise); one'
           ' line per watched process, read by the soakd instance on its'
           ' host. ')
PID = '{{target}} pid {{pid}} ({{instance}})'
SOAKD_SELF = 'soakd ({{instance}})'
REQ_BUCKETS = 'target_le:soakd_request_duration_seconds_bucket:rate5m'
HIDE_FROM = {'legend': False, 'tooltip': False, 'viz': False}


def sel(metric, selector=T):
    return '%s{%s}' % (metric, selector)


def quantile(q, buckets):
    return 'histogram_quantile(%s, sum by (le) (%s))' % (q, sel(buckets))


def targets(queries, **extra):
    """(expr, legend) pairs as Grafana query targets A, B, ..."""
    return [dict({'datasource': DS, 'expr': expr, 'legendFormat': legend,
                  'refId': chr(ord('A') + i)}, **extra)
            for i, (expr, legend) in enumerate(queries)]


def steps(*colored):
    """Threshold steps: green from the bottom, then (color, value) pairs."""
    return {'mode': 'absolute',
            'steps': [{'color': 'green', 'value': None}]
            + [{'color': c, 'value': v} for c, v in colored]}


def panel(kind, title, w, h, description, summed, field_config, options, tgts):
    text = prose(description) + (SUMMED if summed else '')
    return {'type': kind, 'id': None, 'title': title % V, 'description': text,
            'datasource': DS, 'gridPos': {'w': w, 'h': h},
            'fieldConfig': field_config, 'options': options, 'targets': tgts}


def stat(title, unit, queries, description, summed=False, text='auto',
         thresholds=(), decimals=None, mappings=()):
    defaults = {'unit': unit, 'color': {'mode': 'thresholds'},
                'thresholds': steps(*thresholds), 'mappings': list(mappings)}
    if decimals is not None:
        defaults['decimals'] = decimals
    options = {
        'reduceOptions': {'calcs': ['lastNotNull'], 'fields': '',
                          'values': False},
        'orientation': 'auto', 'textMode': text,
        'colorMode': 'value' if thresholds else 'none',
        'graphMode': 'none', 'justifyMode': 'auto'}
    return panel('stat', title, 4, 4, description, summed,
                 {'defaults': defaults, 'overrides': []}, options,
                 targets(queries, range=False, editorMode='code',
                         instant=True))


def timeseries(title, unit, queries, description, w, h=8, summed=False,
               stack=False, log=False, fill=None, min0=None, thresholds=(),
               overrides=()):
    """Lines, one per series. Filled 10 % (30 % stacked, none on a log
    axis); the y axis starts at 0 unless it is logarithmic."""
    if fill is None:
        fill = 30 if stack else 0 if log else 10
    custom = {
        'drawStyle': 'line', 'lineInterpolation': 'linear', 'lineWidth': 1,
        'fillOpacity': fill, 'gradientMode': 'none', 'showPoints': 'never',
        'pointSize': 4, 'spanNulls': False, 'axisPlacement': 'auto',
        'axisCenteredZero': False, 'axisSoftMin': None,
        'scaleDistribution': ({'type': 'log', 'log': 10} if log
                              else {'type': 'linear'}),
        'stacking': {'mode': 'normal' if stack else 'none', 'group': 'A'},
        'thresholdsStyle': {'mode': 'line+area' if thresholds else 'off'},
        'hideFrom': HIDE_FROM}
    defaults = {'unit': unit, 'custom': custom,
                'color': {'mode': 'palette-classic'},
                'thresholds': steps(*thresholds)}
    if min0 is None:
        min0 = not log
    if min0:
        defaults['min'] = 0
    options = {'legend': {'showLegend': True, 'displayMode': 'list',
                          'placement': 'bottom', 'calcs': []},
               'tooltip': {'mode': 'multi', 'sort': 'desc'}}
    return panel('timeseries', title, w, h, description, summed,
                 {'defaults': defaults, 'overrides': list(overrides)},
                 options, targets(queries, range=True, editorMode='code'))


def heatmap(title, query, description, w, h, summed=False):
    """Pre-bucketed rates (format heatmap), one cell row per `le`."""
    options = {
        'calculate': False,
        'yAxis': {'axisPlacement': 'left', 'reverse': False, 'unit': 's'},
        'rowsFrame': {'layout': 'le'},
        'color': {'mode': 'scheme', 'scheme': 'Spectral',
                  'fill': 'dark-orange', 'scale': 'exponential',
                  'exponent': 0.5, 'steps': 64, 'reverse': True},
        'cellGap': 1, 'cellValues': {'unit': 'reqps'},
        'filterValues': {'le': 1e-09}, 'showValue': 'never',
        'tooltip': {'show': True, 'yHistogram': True},
        'legend': {'show': True},
        'exemplars': {'color': 'rgba(255,0,255,0.7)'}}
    field_config = {'defaults': {'unit': 'reqps',
                                 'custom': {'hideFrom': HIDE_FROM,
                                            'scaleDistribution':
                                                {'type': 'linear'}}},
                    'overrides': []}
    return panel('heatmap', title, w, h, description, summed, field_config,
                 options, targets([query], range=True, editorMode='code',
                                  format='heatmap'))


def state_timeline(title, queries, description, w, h=8, summed=False,
                   mappings=()):
    """A band per series whose colour and text follow `mappings` (value ->
    state), merged where the value stays the same."""
    defaults = {'color': {'mode': 'thresholds'}, 'thresholds': steps(),
                'mappings': list(mappings),
                'custom': {'lineWidth': 0, 'fillOpacity': 80,
                           'hideFrom': HIDE_FROM}}
    options = {'mergeValues': True, 'showValue': 'auto',
               'alignValue': 'left', 'rowHeight': 0.9,
               'legend': {'showLegend': True, 'displayMode': 'list',
                          'placement': 'bottom'},
               'tooltip': {'mode': 'single', 'sort': 'none'}}
    return panel('state-timeline', title, w, h, description, summed,
                 {'defaults': defaults, 'overrides': []}, options,
                 targets(queries, range=True, editorMode='code'))


def value_map(*entries):
    """A value mapping: (value, text, colour) per state."""
    return {'type': 'value', 'options': {
        str(v): {'text': text, 'color': colour, 'index': i}
        for i, (v, text, colour) in enumerate(entries)}}


def row(title):
    return {'type': 'row', 'id': None, 'title': title, 'collapsed': False,
            'panels': [], 'gridPos': {'w': 24, 'h': 1}}


# Field overrides: series matched by a regexp on their name, or by query.
def by_name(regexp, *props):
    return {'matcher': {'id': 'byRegexp', 'options': regexp},
            'properties': list(props)}


def by_query(ref, *props):
    return {'matcher': {'id': 'byFrameRefID', 'options': ref},
            'properties': list(props)}


def prop(name, value):
    return {'id': name, 'value': value}


def color(name):
    return prop('color', {'mode': 'fixed', 'fixedColor': name})


DASHED = prop('custom.lineStyle', {'fill': 'dash', 'dash': [10, 10]})
UNFILLED = prop('custom.fillOpacity', 0)


def layout(panels):
    """Numbers the panels and places them left to right in a 24-wide grid,
    starting a new line when a panel does not fit and after each row."""
    x = y = line_h = 0
    for n, p in enumerate(panels, 1):
        w, h = p['gridPos']['w'], p['gridPos']['h']
        if p['type'] == 'row' or x + w > 24:
            x, y, line_h = 0, y + line_h, 0
        p['id'] = n
        p['gridPos'] = {'x': x, 'y': y, 'w': w, 'h': h}
        x, line_h = x + w, max(line_h, h)
    return panels


# ---------------------------------------------------------------------------
# The dashboard
# ---------------------------------------------------------------------------
def panels():
    return [
        row('Overview'),
        stat('Connections open / desired', 'short', [
            ('sum(%s)' % sel('target:soakd_connections_open:sum'), 'open'),
            ('sum(%s)' % sel('target:soakd_connections_desired:sum'),
             'desired'),
        ], """Connections held now against the connections the plans want,
           over the selected targets.""", summed=True,
           text='value_and_name'),
        stat('Responses / s', 'reqps', [
            ('sum(%s)' % sel('target:soakd_responses:rate1m'), 'responses/s'),
        ], """Complete responses per second (any status class) over the
           selected targets, 1m rate.""", summed=True),
        stat('Error ratio (5m)', 'percentunit', [
            ('sum({e}) / (sum({e}) + sum({r}))'.format(
                e=sel('target:soakd_errors:rate5m'),
                r=sel('target:soakd_responses:rate5m')), 'error ratio'),
        ], """Failures / (failures + complete responses) over 5 minutes,
           selected targets together. Red above %(error_ratio_pct)s (the
           SoakdErrorRatioHigh threshold).""", summed=True,
           thresholds=[('red', CONFIG['error_ratio'])], decimals=2),
        stat('Latency p99 (5m)', 's', [
            (quantile(0.99, REQ_BUCKETS), 'p99'),
        ], """p99 request latency over 5 minutes from the histogram, the
           selected targets merged (buckets summed, never quantiles
           averaged). The latency panels below draw the SLO.""",
           summed=True),
        stat('Schedule lag p99 (5m)', 's', [
            (quantile(0.99, 'target_le:soakd_schedule_lag_seconds_bucket:rate5m'),
             'lag p99'),
        ], """The load generator's own health: p99 of due time -> written.
           Above %(lag_max_ms)s soakd is behind and its latency figures are
           not trustworthy (SoakdGeneratorSaturated).""", summed=True,
           thresholds=[('orange', CONFIG['lag_warning']),
                       ('red', CONFIG['lag_max'])]),
        stat('Instances up / stalled', 'short', [
            ('sum(%s)' % sel('up', I), 'up'),
            ('count(%s == 0) or vector(0)' % sel('soakd_healthy', I),
             'stalled'),
            ('count by (shards) (%s)' % sel('soakd_shard_info', I),
             'shards of {{shards}}'),
        ], """soakd instances of the selected job and instances that
           Prometheus scrapes successfully (up), how many report a stalled
           worker loop (soakd_healthy == 0, which the SoakdWatchdogFailing
           alert watches), and how many shards of an N-shard plan report
           (--shard I/N; "shards of 1" for unsharded instances): fewer than
           N means a share of the plan is not running.""",
           text='value_and_name'),

        row('Connections'),
        timeseries('Connections open vs desired', 'short', [
            (sel('target:soakd_connections_open:sum'), '{{target}} open'),
            (sel('target:soakd_connections_desired:sum'),
             '{{target}} desired'),
        ], """Connections held (open) against the connections the plan
           wants (desired, dashed), per target. In steady state they are
           equal; during the ramp the difference is in connecting and
           backoff. Open below %(connections_ratio_pct)s of desired for
           %(connections_for_words)s raises SoakdConnectionsBelowDesired.""",
           w=12, summed=True,
           overrides=[by_name('.* desired', DASHED, UNFILLED)]),
        timeseries('Connections by state', 'short', [
            (sel('target_state:soakd_connections:sum'),
             '{{target}} {{state}}'),
        ], """Connection slots by state, stacked: open, connecting (TCP
           connect in progress) and backoff (waiting to reconnect after a
           failure, or for a ramp token). A backoff that grows after the
           ramp means the target refuses or drops connections.""",
           w=12, summed=True, stack=True, overrides=[
               by_name('.* backoff', color('red')),
               by_name('.* connecting', color('yellow')),
               by_name('.* open', color('green'))]),
        timeseries('Connects and connect failures / s', 'ops', [
            (sel('target:soakd_connections_opened:rate1m'),
             '{{target}} connects'),
            (sel('target_kind:soakd_errors:rate1m',
                 T + ',kind=~"connect_.*|addr_unavailable|fd_limit|tls_.*"'),
             '{{target}} {{kind}}'),
        ], """Successful connects per second, and failed connect attempts by
           kind: connect_refused, connect_timeout, connect_other (the
           target), tls_certificate and tls_handshake (https: the
           certificate, or the rest of the handshake), addr_unavailable and
           fd_limit (limits of the soakd host: source ports, open files).
           Reconnects are limited by the backoff and --ramp, so a dead target
           never shows a storm.""",
           w=8, summed=True, overrides=[
               by_name('.* (connect_.*|addr_unavailable|fd_limit|tls_.*)',
                       prop('custom.lineWidth', 2))]),
        timeseries('Connect time p99', 's', [
            (sel('target:soakd_connect_duration_seconds:p99_5m'),
             '{{target}} p99'),
        ], """p99 TCP connect time of successful connects over 5 minutes,
           from the histogram. A rising connect p99 usually means a full
           accept backlog on the target.""", w=8, summed=True),
        timeseries('Connections closed by reason / s', 'ops', [
            (sel('target_reason:soakd_connections_closed:rate1m'),
             '{{target}} {{reason}}'),
        ], """Closed connections per second by reason: server_close (the
           server's Connection: close or HTTP/1.0, not an error), error,
           churn (planned by --max-requests-per-conn / --max-conn-lifetime /
           --close) and shutdown.""", w=8, summed=True),

        row('Requests'),
        timeseries('Request rate', 'reqps', [
            (sel('target:soakd_requests_sent:rate1m'), '{{target}} sent'),
            (sel('target:soakd_responses:rate1m'), '{{target}} completed'),
            (sel('target:soakd_errors:rate1m'), '{{target}} failed'),
        ], """Requests written per second (sent), complete responses per
           second (completed) and failures per second (failed, all error
           kinds including failed connects), 1m rates. Sent minus completed
           is requests lost to errors or still in flight.""",
           w=6, summed=True, overrides=[
               by_name('.* sent', DASHED, UNFILLED),
               by_name('.* failed', color('red'))]),
        timeseries('Responses by class', 'reqps', [
            (sel('target_code:soakd_responses:rate1m'),
             '{{target}} {{code}}'),
        ], """Complete responses per second by status class (1xx is normally
           0: interim responses are skipped), stacked. 4xx and 5xx are
           responses, not soakd errors: they do not count in the error
           ratio.""", w=6, summed=True, stack=True, overrides=[
               by_name('.* 2xx', color('green')),
               by_name('.* 3xx', color('blue')),
               by_name('.* 4xx', color('orange')),
               by_name('.* 5xx', color('red'))]),
        timeseries('Errors by kind', 'ops', [
            (sel('target_kind:soakd_errors:rate1m'), '{{target}} {{kind}}'),
        ], """Failures per second by kind. addr_unavailable and fd_limit are
           limits of the soakd host (fix those first); connect_* the target
           not accepting; reset and eof the server dropping connections with
           requests owed; timeout no complete response within
           --request-timeout; protocol malformed responses.""",
           w=6, summed=True),
        timeseries('Error ratio', 'percentunit', [
            (sel('target:soakd_error_ratio:rate5m'), '{{target}}'),
        ], """Failures / (failures + complete responses) over 5 minutes, per
           target. It mixes lost requests and failed connect attempts
           (docs/metrics.md). Above %(error_ratio_pct)s for
           %(error_ratio_for_words)s raises SoakdErrorRatioHigh (the red
           line).""", w=6, summed=True,
           thresholds=[('red', CONFIG['error_ratio'])]),
        timeseries('Bytes received and sent', 'Bps', [
            (sel('target:soakd_received_bytes:rate1m'),
             '{{target}} received'),
            (sel('target:soakd_sent_bytes:rate1m'), '{{target}} sent'),
        ], """Bytes per second read from (received) and written to (sent)
           the target's connections: HTTP heads and bodies, without TCP/IP
           overhead.""", w=24, h=6, summed=True),

        row('Latency'),
        timeseries('Request latency p50 / p90 / p99 / p99.9', 's', [
            (quantile(0.5, REQ_BUCKETS), 'p50'),
            (quantile(0.9, REQ_BUCKETS), 'p90'),
            (quantile(0.99, REQ_BUCKETS), 'p99'),
            (quantile(0.999, REQ_BUCKETS), 'p99.9'),
            ('soakd:request_duration_seconds:slo_p99', 'SLO (p99)'),
            ('max(%s)' % sel('soakd_baseline_latency_seconds',
                             T + ',quantile="0.5"'), 'baseline p50'),
            ('max(%s)' % sel('soakd_baseline_latency_seconds',
                             T + ',quantile="0.99"'), 'baseline p99'),
        ], """Request latency quantiles over 5 minutes from the histogram,
           the selected targets merged: bucket rates summed by le, then
           histogram_quantile (quantiles are never averaged). Counted from
           the time each request was due in paced (-i) and open-loop (-r)
           modes, from the write in closed loop. Interpolated inside buckets
           about 25 %% wide; the red dashed line is the SLO of
           SoakdLatencyAboveSLO (on p99). With soakd run --baseline, the
           baseline's p50 and p99 are dashed in the same colours (its whole
           run, or the same elapsed time of a staged baseline; with several
           targets selected, the highest).""", w=12, summed=True, log=True,
           overrides=[by_name('SLO.*', DASHED, color('red')),
                      by_name('baseline p50', DASHED, UNFILLED,
                              color('green')),
                      by_name('baseline p99', DASHED, UNFILLED,
                              color('blue'))]),
        timeseries('p99 by target, vs the baseline, a day ago and the SLO',
                   's', [
            (sel('target:soakd_request_duration_seconds:p99_10m'),
             '{{target}} p99'),
            (sel('target:soakd_request_duration_seconds:p99_10m_offset1d'),
             '{{target}} p99 a day ago'),
            ('soakd:request_duration_seconds:slo_p99', 'SLO (p99)'),
            ('max by (target) (%s)' % sel('soakd_baseline_latency_seconds',
                                          T + ',quantile="0.99"'),
             '{{target}} p99 baseline'),
        ], """p99 request latency per target over 10 minutes; with soakd run
           --baseline, the baseline's p99 (dashed, bold), which
           SoakdLatencyRegression's verdicts compare each window with; and the same
           10 minutes one day earlier (dashed): SoakdLatencyAboveDayAgo fires
           when the first exceeds %(day_ago_factor)s x the second and
           %(day_ago_floor_ms)s for %(day_ago_for_words)s. Red: the
           SLO, which SoakdLatencyAboveSLO compares with the 5-minute
           p99.""", w=12, summed=True, log=True, overrides=[
               by_name('.* a day ago', DASHED),
               by_name('.* baseline', DASHED, UNFILLED,
                       prop('custom.lineWidth', 2)),
               by_name('SLO.*', DASHED, color('red'))]),
        heatmap('Request latency heatmap',
                ('sum by (le) (%s)' % sel(REQ_BUCKETS), '{{le}}'),
                """Requests per second in each latency bucket (5m rates of
                the histogram, selected targets merged): shows the whole
                distribution, a second mode or a slow tail that quantiles
                hide. Buckets run from 0.1 ms to 60 s, about 25 %% wide
                between 1 ms and 1 s.""", w=12, h=9, summed=True),
        timeseries('Exact p99 per instance (last 10 s)', 's', [
            (sel('soakd_request_duration_window_seconds',
                 IT + ',quantile="0.99"'), '{{instance}} {{target}} p99'),
        ], """soakd_request_duration_window_seconds: the exact p99
           (HdrHistogram, 0.1 %%) of the requests each instance completed in
           its last 10 seconds, one line per instance and target.
           Single-instance figures: do not average or sum them across
           instances; the merged p99 lies between the lowest and the highest
           line. Gaps when nothing completed in the window; with scrapes
           slower than 10 s some requests are never seen here (the histogram
           panels miss nothing).""", w=12, h=9, log=True),
        timeseries('Schedule lag p99 - generator health (above'
                   ' %(lag_max_ms)s latency is not trustworthy)', 's', [
            (sel('target:soakd_schedule_lag_seconds:p99_5m'),
             '{{target}} lag p99'),
        ], """The load generator's own health, not the target's: p99 over 5
           minutes of the time from when each request was due until soakd
           wrote it. Above about %(lag_max_ms)s (red) soakd is saturated and
           the latency figures above are not trustworthy
           (SoakdGeneratorSaturated): give it more CPU (-t), more instances,
           or less load. Requests of slots waiting to reconnect are late
           too, so read it with connections in backoff.""",
           w=24, h=7, summed=True, fill=0,
           thresholds=[('red', CONFIG['lag_max'])]),

        row('Requests of a mix'),
        timeseries('p99 by request', 's', [
            (sel('target_request:soakd_request_duration_seconds:p99_5m'),
             '{{target}} {{request}}'),
        ], """p99 latency over 5 minutes of each request of a workload's
           mix (the request label: its name in [[workload.request]], or
           METHOD path): the one endpoint that slows down while the others
           stay fast. A single-URL workload has one line.""",
           w=12, summed=True, log=True),
        timeseries('Check failures by request', 'ops', [
            (sel('target_request_check:soakd_check_failures:rate1m'),
             '{{target}} {{request}} {{check}}'),
        ], """Responses per second that failed a configured check, by request
           and check (status, header, body, size). They are complete
           responses, not errors: the connection is kept. Above
           %(check_ratio_pct)s of a request's responses for
           %(check_for_words)s raises SoakdCheckFailures. Empty lines (0) for
           requests without checks.""", w=12, summed=True),

        row('soakd process (per instance)'),
        timeseries('soakd resident memory', 'bytes', [
            (sel('process_resident_memory_bytes', I), '{{instance}}'),
        ], """Resident memory of each soakd process. soakd uses constant
           memory however long it runs: after the ramp this line should be
           flat.""", w=6),
        timeseries('soakd CPU', 'percentunit', [
            ('rate(%s[5m])' % sel('process_cpu_seconds_total', I),
             '{{instance}}'),
        ], """CPU used by each soakd process, 5m rate (100 %% = one core).
           Close to its worker thread count (-t, default all CPUs) in cores,
           soakd is saturated: check the schedule lag. soakd counts its CPU
           in whole seconds, hence the 5-minute window.""", w=6),
        timeseries('soakd open fds vs limit', 'short', [
            (sel('process_open_fds', I), '{{instance}} open'),
            (sel('process_max_fds', I), '{{instance}} max'),
        ], """Open file descriptors of each soakd process (one per
           connection plus a few) and its limit (dashed; soakd raises its
           soft limit to the hard limit at start). Above %(fds_ratio_pct)s
           for %(fds_for_words)s raises SoakdFdsNearLimit; at the limit
           connects fail as fd_limit.""", w=6, log=True,
           overrides=[by_name('.* max', DASHED)]),
        timeseries('Config reloads', 'short', [
            ('sum by (instance, result) (increase(%s[$__rate_interval]))'
             % sel('soakd_config_reloads_total', I),
             '{{instance}} {{result}}'),
            ('time() - %s'
             % sel('soakd_config_last_reload_success_timestamp_seconds', I),
             '{{instance}} since last success'),
        ], """Config reloads per instance by result (bars: reloads in each
           interval; failures in red) and, on the right axis, the time since
           the last successful reload. Empty until soakd runs with a config
           file (soakd_config_reloads_total,
           soakd_config_last_reload_success_timestamp_seconds).""",
           w=6, overrides=[
               by_query('A', prop('custom.drawStyle', 'bars'),
                        prop('custom.fillOpacity', 80)),
               by_name('.* failure', color('red')),
               by_query('B', prop('unit', 's'),
                        prop('custom.axisPlacement', 'right'))]),

        row('Server under test (soakd --target-pid)'),
        # The server's resources, each with soakd's own beside it (dashed,
        # per instance): a line that climbs for the server while soakd's
        # stays flat is the server's; both climbing points at the host or
        # at soakd. The same figures the report's trends judge
        # (target_rss_slope, target_fds_slope, soakd_rss_slope).
        timeseries('Server resident memory (soakd dashed)', 'bytes', [
            (sel('soakd_target_process_resident_memory_bytes', IT), PID),
            (sel('process_resident_memory_bytes', I), SOAKD_SELF),
        ], WATCHED + """Resident memory of the server under test: in a soak,
           a line that keeps climbing after warm-up is a leak. Dashed: each
           soakd's own resident memory, which should stay flat after the
           ramp.""", w=6, overrides=[by_query('B', DASHED, UNFILLED)]),
        timeseries('Memory growth per hour (soakd dashed)', 'bytes', [
            ('deriv(%s[1h]) * 3600'
             % sel('soakd_target_process_resident_memory_bytes', IT), PID),
            ('deriv(%s[1h]) * 3600'
             % sel('process_resident_memory_bytes', I), SOAKD_SELF),
        ], WATCHED + """Slope of the resident memory over the last hour
           (deriv), in bytes per hour: a slow leak shows as a line that
           stays above zero; above %(memory_growth_per_hour)s bytes an hour
           for %(memory_growth_for_words)s (and real growth over the hour)
           raises SoakdTargetMemoryGrowing. Dashed: soakd's own (a least
           squares slope, fine for a graph; the report's trends use a
           Theil-Sen slope with a significance test).""", w=6, min0=False,
           overrides=[by_query('B', DASHED, UNFILLED)]),
        timeseries('Server CPU (soakd dashed)', 'percentunit', [
            ('rate(%s[$__rate_interval])'
             % sel('soakd_target_process_cpu_seconds_total', IT), PID),
            ('rate(%s[5m])' % sel('process_cpu_seconds_total', I),
             SOAKD_SELF),
        ], WATCHED + """CPU (user + system) of the server under test, 100 %%
           = one core. Dashed: soakd's own, 5m rate (it counts whole
           seconds). On one host the two compete for the same cores.""",
           w=6, overrides=[by_query('B', DASHED, UNFILLED)]),
        timeseries('Server open fds', 'short', [
            (sel('soakd_target_process_open_fds', IT), PID),
        ], WATCHED + """Open file descriptors of the server under test:
           about one per connection held; growth with connections flat is a
           descriptor leak (soakd's own are in the soakd process row).""",
           w=6),
    ] + server_panels() + baseline_panels() + outage_panels() + websocket_panels() \
        + h2_panels() + h3_panels() + grpc_panels() + grpc_stream_panels()


# The server watch (--target-metrics, --prometheus, --target-pidfile,
# --target-cgroup)
def server_panels():
    """The row of the server's own series as soakd's watch read them,
    beside the client's figures: values, slopes, sources."""
    WS = 'job=~"$job",instance=~"$instance"'
    SERIES = '{{watch}} {{series}}'
    return [
        row("Server's own metrics (soakd --target-metrics, --prometheus)"),
        timeseries('Watched values', 'short', [
            (sel('soakd_watch_value', WS), SERIES),
        ], """Each series soakd's server watch reads, in its own unit (bytes
           for memory): the server's exposition (--target-metrics), the
           Prometheus that scrapes its pods (--prometheus: one series per
           pod), or its pid file or cgroup on soakd's host. Absent while its
           source is stale. A line that climbs after warm-up while the load
           is flat is what the soak is for.""", w=8),
        timeseries('Growth per hour, relative to the value', 'percentunit', [
            ('%s * 3600 / %s' % (sel('soakd_watch_slope_per_second', WS), sel('soakd_watch_value', WS)),
             SERIES),
        ], """Each series' Theil-Sen slope over the steady part (soakd's own,
           between the server's restarts), as a share of its value per hour.
           Significant and above %(server_growth_ratio_per_hour_pct)s an hour for
           %(server_growth_for_words)s: SoakdServerLeak. The run's thresholds
           (slope(NAME), drift(NAME), max(NAME)) judge the same figures.""",
           w=8, min0=False),
        timeseries('Watch sources', 'short', [
            ('sum by (source) (%s)' % sel('soakd_watch_source_up', WS), '{{source}} up'),
            ('sum by (source, reason) (increase(%s[$__rate_interval])) > 0'
             % sel('soakd_watch_scrape_failures_total', WS), '{{source}} {{reason}}'),
            ('sum by (source) (increase(%s[$__rate_interval])) > 0'
             % sel('soakd_watch_restarts_total', WS), '{{source}} restart'),
        ], """1 while a source answers (0: stale, its series absent); failed
           reads per interval by reason (refused, timeout, status,
           too_large, malformed, query, gone, …); restarts of the server seen
           there (a new process_start_time_seconds, a counter reset, a pod
           replaced, a new PID).""", w=8, overrides=[
               by_name('.* restart', color('red'))]),
    ]


# soakd run --baseline
def baseline_panels():
    """The row of a soak judged live against an earlier run: the verdicts
    of each window, the changes, throughput and errors beside the
    baseline's. Empty without --baseline."""
    return [
        row('Against the baseline (soakd run --baseline)'),
        state_timeline('Verdict of each window against the baseline', [
            ('max by (target, metric) (%s)' % sel('soakd_baseline_verdict'),
             '{{target}} {{metric}}'),
        ], """soakd's own verdict of each --baseline-window (default 5m)
           against the baseline run, per target and metric (p50, p99, p99.9,
           requests/s, error rate), with soakd compare's rules: a change
           counts only beyond the tolerance (10 %%) and, for latency, 1 ms,
           when the rank test on the window's intervals finds it, and when
           soakd's own schedule lag does not explain it. Red: worse; green:
           better. Worse for %(baseline_for_words)s raises
           SoakdLatencyRegression (latency) or SoakdThroughputRegression
           (requests/s).""", w=12,
           mappings=[value_map((-1, 'better', 'green'), (0, 'same', 'text'),
                               (1, 'worse', 'red'))]),
        timeseries('Change against the baseline', 'percentunit', [
            ('max by (target, metric) (%s)'
             % sel('soakd_baseline_change_ratio'), '{{target}} {{metric}}'),
        ], """The last window's change against the baseline, (window -
           baseline) / baseline, per target and metric: +100 %% is twice the
           baseline's latency, -20 %% of requests/s a fifth fewer. A change
           within the noise is drawn too; the verdicts panel says which
           count.""", w=12, min0=False),
        timeseries('Requests / s vs the baseline', 'reqps', [
            (sel('target:soakd_responses:rate1m'), '{{target}} now'),
            ('max by (target) (%s)'
             % sel('soakd_baseline_requests_per_second'),
             '{{target}} baseline'),
        ], """Complete responses per second now (1m rate, all instances)
           and the baseline's (dashed: its whole run, or the same elapsed
           time of a staged baseline, per soakd instance; the highest is
           drawn).""", w=10, summed=True,
           overrides=[by_name('.* baseline', DASHED, UNFILLED)]),
        timeseries('Error ratio vs the baseline', 'percentunit', [
            (sel('target:soakd_error_ratio:rate5m'), '{{target}} now'),
            ('max by (target) (%s)' % sel('soakd_baseline_error_ratio'),
             '{{target}} baseline'),
        ], """Failures / (failures + complete responses) over 5 minutes,
           and the baseline's (dashed; host limits such as addr_unavailable
           and fd_limit left out of it, as soakd compare does).""", w=10,
           summed=True, overrides=[by_name('.* baseline', DASHED, UNFILLED)]),
        stat('Baseline load', 'none', [
            ('min(%s)' % sel('soakd_baseline_load_matches'), 'load'),
        ], """1 (same load) when the baseline ran this run's connections,
           pace, pipeline, streams, protocol and stages; 0 (loads differ)
           otherwise, and then its verdicts are a comparison, not a
           regression verdict: the alerts leave them out and soakd neither
           aborts nor fails the run on them. Empty without --baseline.""",
           thresholds=[('green', 1)],
           mappings=[value_map((1, 'same load', 'green'),
                               (0, 'loads differ', 'red'))]),
    ]


# Outages and events
def outage_panels():
    """The row of outages soakd found and the events of the run (which
    the dashboard also draws as annotations)."""
    return [
        row('Outages and events'),
        timeseries('In an outage', 'short', [
            ('max by (target) (%s)' % sel('soakd_outage_active'), '{{target}}'),
        ], """1 while soakd finds the target in an outage: more than
           --outage-errors of its attempts failing in a second, or open
           connections under --outage-open of those desired, until both
           stayed back for --outage-settle. For %(outage_for_words)s:
           SoakdOutage. The run's report lists each one (start, duration,
           requests failed and late, reconnect and recovery times, the event
           it is attributed to).""", w=8, overrides=[
               by_query('A', prop('custom.drawStyle', 'bars'),
                        prop('custom.fillOpacity', 80), color('red'))]),
        timeseries('Last outage: duration, reconnect, recovery', 's', [
            ('max by (target) (%s)' % sel('soakd_outage_last_duration_seconds'),
             '{{target}} duration'),
            ('max by (target) (%s)' % sel('soakd_outage_last_reconnect_seconds'),
             '{{target}} reconnect'),
            ('max by (target) (%s)' % sel('soakd_outage_last_recovery_seconds'),
             '{{target}} recovery'),
        ], """The last outage that ended: how long it lasted, how long
           after it every desired connection was open again (reconnect) and
           how long until a second's p99 was back within tolerance of the
           minute before it (recovery; empty until then).""", w=8),
        timeseries('Events', 'short', [
            ('sum by (name) (increase(%s[$__rate_interval])) > 0'
             % sel('soakd_events_total', 'job=~"$job"'), '{{name}}'),
            ('sum by (name) (increase(%s[$__rate_interval])) > 0'
             % sel('soakd_event_failures_total', 'job=~"$job"'),
             '{{name}} failed'),
        ], """Events per interval, by name: commands soakd ran at a time of
           the run (a deploy, a fail-over) and marks from outside (SIGUSR2,
           --event-socket); the annotations mark each on every panel.
           Failed: a command that did not exit 0 (SoakdEventFailed).""",
           w=8, overrides=[by_query('A', prop('custom.drawStyle', 'bars'),
                                    prop('custom.fillOpacity', 80)),
                           by_name('.* failed', color('red'))]),
    ]


# HTTP/2
def h2_panels():
    """The HTTP/2 row: GOAWAYs and stream resets by code, streams open,
    the version negotiated. Empty for targets soakd reaches over HTTP/1.1."""
    def by_code(metric):
        return ('sum by (target, code) (increase(%s[$__rate_interval])) > 0'
                % sel(metric))
    return [
        row('HTTP/2'),
        timeseries('GOAWAYs by code', 'short', [
            (by_code('soakd_h2_goaways_total'), '{{target}} {{code}}'),
        ], """GOAWAY frames the servers sent, per interval, by error code.
           NO_ERROR is graceful (a load balancer retiring a connection after
           so many streams or so long: soakd finishes the streams below the
           GOAWAY's last stream and sends the others again on a new
           connection, not errors). Any other code (red) means the server
           gave up on the connection: SoakdH2GoawayError.""", w=6,
           overrides=[by_name('.*NO_ERROR', color('green')),
                      by_name('^(?!.*NO_ERROR).*$', color('red')),
                      by_query('A', prop('custom.drawStyle', 'bars'),
                               prop('custom.fillOpacity', 80))]),
        timeseries('Stream resets by code', 'short', [
            (by_code('soakd_h2_stream_resets_total'), '{{target}} {{code}}'),
        ], """HTTP/2 streams the servers reset (RST_STREAM), per interval,
           by error code. REFUSED_STREAM means the stream was not processed
           and soakd sends it again; the others count as stream_reset errors
           of their requests.""", w=6,
           overrides=[by_query('A', prop('custom.drawStyle', 'bars'),
                               prop('custom.fillOpacity', 80))]),
        timeseries('HTTP/2 streams open', 'short', [
            ('sum by (target) (%s)' % sel('soakd_h2_streams_open'),
             '{{target}}'),
        ], """Requests in flight on HTTP/2 streams, all instances of a
           target together: at most connections × --streams (and the
           server's SETTINGS_MAX_CONCURRENT_STREAMS). Flat at that ceiling
           with latency rising: the server is the bottleneck.""", w=6,
           summed=True),
        timeseries('HTTP version negotiated', 'short', [
            ('max by (target, version) (%s) > 0'
             % sel('soakd_http_version_info'), '{{target}} HTTP/{{version}}'),
        ], """The HTTP version each target's connections negotiated last
           (soakd_http_version_info is 1 for it: 1.1, 2, or 3 for --http 3
           over QUIC): with --http auto, a line moving from HTTP/2 to
           HTTP/1.1 means the server (or a proxy in front of it) stopped
           offering h2 in ALPN.""", w=6),
    ]


# HTTP/3
def h3_panels():
    """The HTTP/3 row: GOAWAYs, stream resets by code, connections open.
    Empty unless a workload runs with --http 3."""
    return [
        row('HTTP/3'),
        timeseries('HTTP/3 GOAWAYs', 'short', [
            ('sum by (target) (increase(%s[$__rate_interval])) > 0'
             % sel('soakd_h3_goaways_total'), '{{target}}'),
        ], """HTTP/3 GOAWAY frames the servers sent, per interval. An HTTP/3
           GOAWAY carries no error code: it is always graceful (a server or
           load balancer retiring a connection): soakd finishes the requests
           below it and sends the others again on a new connection, not
           errors. A server that gives up on a connection closes it with an
           HTTP/3 error code instead, counted as h3_closed errors.""", w=8,
           overrides=[by_query('A', prop('custom.drawStyle', 'bars'),
                               prop('custom.fillOpacity', 80))]),
        timeseries('HTTP/3 stream resets by code', 'short', [
            ('sum by (target, code) (increase(%s[$__rate_interval])) > 0'
             % sel('soakd_h3_stream_resets_total'), '{{target}} {{code}}'),
        ], """HTTP/3 request streams the servers reset (RESET_STREAM), per
           interval, by HTTP/3 error code. H3_REQUEST_REJECTED means the
           request was not processed and soakd sends it again; the others
           count as stream_reset errors of their requests.""", w=8,
           overrides=[by_query('A', prop('custom.drawStyle', 'bars'),
                               prop('custom.fillOpacity', 80))]),
        timeseries('HTTP/3 connections open', 'short', [
            ('sum by (target) (%s)'
             % sel('soakd_http_connections_open', T + ',version="3"'),
             '{{target}}'),
        ], """QUIC connections with HTTP/3 established, all instances of a
           target together. Below the workload's connections: handshakes
           failing or connections lost (quic_* and h3_* errors; an idle
           timeout means the keep-alive is off or longer than the
           server's idle timeout).""", w=8, summed=True),
    ]


# gRPC: the row of grpc:// and grpcs:// targets (empty for the others).
def grpc_panels():
    return [
        row('gRPC'),
        timeseries('gRPC calls / s by status', 'ops', [
            ('sum by (target, method, code) (%s) > 0'
             % sel('target_method_code:soakd_grpc_calls:rate1m'),
             '{{target}} {{method}} {{code}}'),
        ], """gRPC calls that ended per second, by method and status code
           (the grpc-status of the trailers, or of a trailers-only answer),
           stacked. Every code but ok is also a grpc_status error of the
           request panels; deadline_exceeded here is the server's, soakd's
           own --request-timeout is the error kind timeout.""", w=12,
           summed=True, stack=True, overrides=[
               by_name('.* ok$', color('green')),
               by_name('^(?!.* ok$).*$', color('red'))]),
        timeseries('gRPC non-OK ratio by method', 'percentunit', [
            (sel('target_method:soakd_grpc_non_ok_ratio:rate5m'),
             '{{target}} {{method}}'),
        ], """Calls ending with a status other than OK / calls that ended,
           over 5 minutes, per method. Above %(grpc_error_ratio_pct)s for
           %(grpc_error_ratio_for_words)s raises SoakdGrpcErrorRatio (the
           red line); the run's own verdict is the grpc_error_rate
           threshold.""", w=12, summed=True,
           thresholds=[('red', CONFIG['grpc_error_ratio'])]),
    ]


# gRPC held streams (--stream subscribe, --stream-message): empty for unary
# calls and for the other protocols.
GRPC_GAP_BUCKETS = 'target_le:soakd_grpc_stream_gap_seconds_bucket:rate5m'
GRPC_SILENCE_BUCKETS = 'target_le:soakd_grpc_stream_silence_seconds_bucket:rate5m'


def grpc_stream_panels():
    return [
        row('gRPC held streams'),
        timeseries('Held streams open', 'short', [
            ('sum by (target, method) (%s)'
             % sel('target_method:soakd_grpc_streams_open:sum'),
             '{{target}} {{method}}'),
        ], """gRPC streams soakd holds open now (--stream subscribe, or
           --stream-message on a client or bidirectional method), by method.
           A dip is a drain (GOAWAY, the close at the end of its grace) or
           a lost connection; the streams come back on the next
           connection.""", w=6, summed=True),
        timeseries('Stream messages / s', 'ops', [
            ('sum by (target, method) (%s)'
             % sel('target_method:soakd_grpc_stream_messages_received:rate1m'),
             '{{target}} {{method}} received'),
            ('sum by (target, method) (%s)'
             % sel('target_method:soakd_grpc_stream_messages_sent:rate1m'),
             '{{target}} {{method}} sent'),
        ], """Messages received on held streams (counted, never decoded)
           and sent on client and bidirectional ones, 1m rates. A server
           stream that pushes every N ms shows streams x 1000/N received; a
           falling line with the streams still open is a server slowing its
           pushes.""", w=6, summed=True,
           overrides=[by_name('.* sent', DASHED, UNFILLED)]),
        timeseries('Stream restarts and lifetime ends / s', 'ops', [
            ('sum by (target, method) (%s)'
             % sel('target_method:soakd_grpc_stream_restarts:rate5m'),
             '{{target}} {{method}} restarts'),
            ('sum by (target, method) (%s)'
             % sel('target_method:soakd_grpc_stream_lifetime_ends:rate5m'),
             '{{target}} {{method}} lifetime ends'),
        ], """Held streams opened again because their connection went away
           (restarts: connection ageing, a GOAWAY above them, a lost
           connection; not errors, the stream_restarts threshold judges
           them) and streams soakd ended at their --stream-lifetime, per
           second over 5 minutes. Restarts that track the server's
           max_connection_age are the ageing working; a step up without a
           deploy is a server dropping streams.""", w=6, summed=True,
           overrides=[by_name('.* lifetime ends', DASHED, UNFILLED)]),
        timeseries('Message gap p50 / longest silence p99', 's', [
            (quantile(0.5, GRPC_GAP_BUCKETS), 'gap p50'),
            (quantile(0.99, GRPC_SILENCE_BUCKETS), 'silence p99'),
        ], """The time between two messages of a held stream (p50) and each
           stream's longest silence per second (p99), over 5 minutes, the
           selected targets merged. The silence catches a stream that has
           stopped receiving while its connection stays up.""", w=6,
           summed=True, log=True),
    ]


# WebSocket: the row of ws:// and wss:// targets (empty for HTTP ones).
WS_RTT_BUCKETS = 'target_le:soakd_ws_ping_rtt_seconds_bucket:rate5m'
WS_REPLY_BUCKETS = 'target_le:soakd_ws_message_duration_seconds_bucket:rate5m'


def websocket_panels():
    return [
        row('WebSocket'),
        timeseries('WebSocket messages / s', 'ops', [
            (sel('target:soakd_ws_messages_sent:rate1m'), '{{target}} sent'),
            (sel('target:soakd_ws_messages_received:rate1m'),
             '{{target}} received'),
        ], """Data messages per second written to (sent) and read from
           (received) the WebSocket targets' sockets, 1m rates; pings, pongs
           and close frames are not messages. An echo shows the two lines
           together; a push service only received; a held socket neither.""",
           w=6, summed=True, overrides=[by_name('.* sent', DASHED, UNFILLED)]),
        timeseries('Ping RTT p50 / p99', 's', [
            (quantile(0.5, WS_RTT_BUCKETS), 'p50'),
            (quantile(0.99, WS_RTT_BUCKETS), 'p99'),
        ], """Time from each ping soakd sends (--ws-ping) to its pong, over 5
           minutes, the selected targets merged: the transport latency of a
           held socket, measured even when no message flows. A p99 that grows
           with the sockets held is a server (or proxy) falling behind on
           its event loop.""", w=6, summed=True, log=True),
        timeseries('Reply latency p50 / p99', 's', [
            (quantile(0.5, WS_REPLY_BUCKETS), 'p50'),
            (quantile(0.99, WS_REPLY_BUCKETS), 'p99'),
        ], """Request/response workloads (--ws-message): from the time a
           message was due to the next data message on its socket, over 5
           minutes, the selected targets merged (coordinated omission
           accounted for as for HTTP requests).""", w=6, summed=True,
           log=True),
        timeseries('Closes by code / s', 'ops', [
            (sel('target_code:soakd_ws_closes:rate1m'), '{{target}} {{code}}'),
        ], """Sockets the servers closed per second, by close code (normal,
           going_away, internal_error, message_too_big, ...), stacked; each
           one is reconnected with backoff. %(ws_lost_ratio_per_min_pct)s of
           the open sockets a minute for %(ws_lost_for_words)s raises
           SoakdWebSocketsLost.""", w=6, summed=True, stack=True, overrides=[
               by_name('.* normal', color('green')),
               by_name('.* internal_error', color('red'))]),
    ]


def query_variable(name, label, query, multi):
    v = {'name': name, 'label': label, 'type': 'query', 'datasource': DS,
         'query': query, 'definition': query, 'refresh': 2, 'sort': 1,
         'multi': multi, 'includeAll': multi, 'current': {}, 'options': [],
         'hide': 0, 'regex': '', 'skipUrlSync': False}
    if multi:
        v['allValue'] = '.*'
    return v


def dashboard():
    return {
        'uid': 'soakd',
        'title': 'soakd',
        'description': prose("""soakd HTTP/1.1 soak tests: connections,
            traffic, errors, latency, the generator's own health and the
            server under test. Needs grafana/rules.yml and grafana/alerts.yml
            loaded in Prometheus."""),
        'tags': ['soakd', 'soak', 'load-testing'],
        'timezone': '', 'editable': True, 'graphTooltip': 1,
        'schemaVersion': 38, 'version': 1, 'refresh': '30s',
        'time': {'from': 'now-6h', 'to': 'now'}, 'timepicker': {},
        'fiscalYearStartMonth': 0, 'liveNow': False, 'weekStart': '',
        'links': [],
        'annotations': {'list': [
            {'builtIn': 1,
             'datasource': {'type': 'grafana', 'uid': '-- Grafana --'},
             'enable': True, 'hide': True,
             'iconColor': 'rgba(0, 211, 255, 1)',
             'name': 'Annotations & Alerts', 'type': 'dashboard'},
            {'datasource': DS, 'enable': True, 'hide': False,
             'iconColor': 'red', 'name': 'soakd alerts firing',
             'expr': 'ALERTS{alertname=~"Soakd.*",alertstate="firing"}',
             'step': '1m', 'titleFormat': '{{alertname}}',
             'textFormat': '{{target}}{{instance}}',
             'useValueForTime': False},
            # The run's events (soakd_events_total moved): commands soakd
            # ran, marks from a CI job; one mark a minute per name.
            {'datasource': DS, 'enable': True, 'hide': False,
             'iconColor': 'purple', 'name': 'soakd events',
             'expr': 'sum by (name) (changes(%s[1m])) > 0'
                     % sel('soakd_events_total', 'job=~"$job"'),
             'step': '1m', 'titleFormat': '{{name}}',
             'textFormat': 'soakd event', 'useValueForTime': False},
        ]},
        'templating': {'list': [
            {'name': 'datasource', 'label': 'Data source',
             'type': 'datasource', 'query': 'prometheus', 'current': {},
             'options': [], 'hide': 0, 'refresh': 1, 'regex': '',
             'multi': False, 'includeAll': False, 'skipUrlSync': False},
            # Only the jobs the alerts watch (CONFIG's job_selector).
            query_variable('job', 'Job', 'label_values(%s, job)' % sel(
                'soakd_build_info', CONFIG['job_selector']), False),
            query_variable('instance', 'Instance', 'label_values(%s, instance)'
                           % sel('soakd_build_info', 'job=~"$job"'), True),
            query_variable('target', 'Target', 'label_values(%s, target)'
                           % sel('soakd_connections_desired', I), True),
        ]},
        'panels': layout(panels()),
    }


# ---------------------------------------------------------------------------
# Recording rules (rules.yml)
# ---------------------------------------------------------------------------
def group(name, rules, comment=None):
    return {'name': name, 'rules': rules, 'comment': comment}


def record(name, expr, comment=None):
    return {'record': name, 'expr': expr, 'comment': comment}


def summed_rate(metric, window, label=None, comment=None):
    """sum by (job, target[, label]) of rate(metric[window]), named
    level:metric:operation as in rules.yml's header."""
    level = 'target_' + label if label else 'target'
    by = 'job, target' + (', ' + label if label else '')
    return record('%s:%s:rate%s' % (level, metric.removesuffix('_total'),
                                    window),
                  'sum by (%s) (rate(%s[%s]))' % (by, metric, window),
                  comment)


def p99_5m(histogram, comment=None):
    return record('target:%s:p99_5m' % histogram,
                  'histogram_quantile(0.99, target_le:%s_bucket:rate5m)'
                  % histogram, comment)


RULES_HEADER = """
Recording rules for soakd (see docs/metrics.md for every metric).

Naming: level:metric:operations (https://prometheus.io/docs/practices/rules/).
Every rule keeps `job` and `target` and sums over everything else, above all
over `instance`: several soakd daemons in one job that load the same target
show as one soak. Latency quantiles are computed from the summed bucket
rates, never by averaging per-instance quantiles.

Used by dashboards/soakd.json and alerts.yml. Checked by
  promtool check rules grafana/rules.yml grafana/alerts.yml
  promtool test rules grafana/tests/*.yml
"""

RULE_GROUPS = [
    group('soakd-connections', [
        record('target:soakd_connections_open:sum',
               'sum by (job, target) (soakd_connections{state="open"})'),
        record('target_state:soakd_connections:sum',
               'sum by (job, target, state) (soakd_connections)'),
        record('target:soakd_connections_desired:sum',
               'sum by (job, target) (soakd_connections_desired)'),
        summed_rate('soakd_connections_opened_total', '1m'),
        summed_rate('soakd_connections_closed_total', '1m', 'reason'),
    ]),
    group('soakd-traffic', [
        summed_rate('soakd_requests_sent_total', '1m'),
        summed_rate('soakd_responses_total', '1m', 'code'),
        summed_rate('soakd_responses_total', '1m'),
        summed_rate('soakd_responses_total', '5m'),
        summed_rate('soakd_errors_total', '1m', 'kind'),
        summed_rate('soakd_errors_total', '1m'),
        summed_rate('soakd_errors_total', '5m'),
        record('target:soakd_error_ratio:rate5m', """
            target:soakd_errors:rate5m
              / (target:soakd_errors:rate5m + target:soakd_responses:rate5m)
        """, comment="""
            Failures over failures plus completed responses. Mixes lost requests
            and failed connect attempts (docs/metrics.md, soakd_errors_total).
            NaN (no alert, a gap in graphs) when nothing happened at all."""),
        summed_rate('soakd_responses_total', '5m', 'request'),
        summed_rate('soakd_check_failures_total', '5m', 'request', comment="""
            Responses that failed a check, per request of a mix, and the request's
            responses: SoakdCheckFailures divides the two."""),
        record('target_request_check:soakd_check_failures:rate1m',
               'sum by (job, target, request, check) (rate(soakd_check_failures_total[1m]))'),
        summed_rate('soakd_sent_bytes_total', '1m'),
        summed_rate('soakd_received_bytes_total', '1m'),
    ]),
    group('soakd-latency', [
        summed_rate('soakd_request_duration_seconds_bucket', '5m', 'le',
                    comment="""
            Bucket rates summed over instances; the dashboard's heatmap and its
            quantiles (p50 ... p99.9, selected targets merged) sum these by `le`."""),
        p99_5m('soakd_request_duration_seconds', comment="""
            Per-target p99 (SoakdLatencyAboveSLO). Other quantiles: the dashboard
            applies histogram_quantile to the bucket rates above."""),
        record('target:soakd_request_duration_seconds:p99_10m',
               'histogram_quantile(0.99, sum by (job, target, le) (rate('
               'soakd_request_duration_seconds_bucket[10m])))', comment="""
            p99 over 10 minutes, now and the same 10 minutes one day earlier:
            SoakdLatencyAboveDayAgo compares the two. The day-ago figure reads the raw
            buckets with `offset 1d`, so it exists as soon as Prometheus holds a
            day of soakd data, whether or not these rules were loaded back then."""),
        record('target:soakd_request_duration_seconds:p99_10m_offset1d',
               'histogram_quantile(0.99, sum by (job, target, le) (rate('
               'soakd_request_duration_seconds_bucket[10m] offset 1d)))'),
        record('target:soakd_request_duration_seconds:p99_10m_offset1h',
               'histogram_quantile(0.99, sum by (job, target, le) (rate('
               'soakd_request_duration_seconds_bucket[10m] offset 1h)))', comment="""
            The same 10 minutes one hour earlier: SoakdLatencyDrifting compares
            the p99 now with it (a drift within one soak, where
            SoakdLatencyAboveDayAgo compares with the day before)."""),
        record('target_request:soakd_request_duration_seconds:p99_5m',
               'histogram_quantile(0.99, sum by (job, target, request, le) (rate('
               'soakd_request_duration_seconds_bucket[5m])))', comment="""
            p99 per request of a workload's mix (the rules above sum the request
            label away, so they read the same with one request or 64)."""),
        summed_rate('soakd_connect_duration_seconds_bucket', '5m', 'le'),
        p99_5m('soakd_connect_duration_seconds'),
        summed_rate('soakd_schedule_lag_seconds_bucket', '5m', 'le',
                    comment="The generator's own health: due time -> written."),
        p99_5m('soakd_schedule_lag_seconds'),
    ]),
    # gRPC
    group('soakd-grpc', [
        record('target_method_code:soakd_grpc_calls:rate1m',
               'sum by (job, target, method, code) (rate(soakd_grpc_calls_total[1m]))'),
        record('target_method:soakd_grpc_non_ok_ratio:rate5m', """
            sum by (job, target, method) (rate(soakd_grpc_calls_total{code!="ok"}[5m]))
              / sum by (job, target, method) (rate(soakd_grpc_calls_total[5m]))
        """, comment="""
            gRPC calls that ended with a status other than OK over the calls that
            ended, per method (the grpc_error_rate threshold's figure, over 5
            minutes). NaN (no alert, a gap) when no call ended."""),
        record('target_method:soakd_grpc_streams_open:sum',
               'sum by (job, target, method) (soakd_grpc_streams_open)'),
        record('target_method:soakd_grpc_stream_messages_received:rate1m',
               'sum by (job, target, method) (rate(soakd_grpc_stream_messages_received_total[1m]))'),
        record('target_method:soakd_grpc_stream_messages_sent:rate1m',
               'sum by (job, target, method) (rate(soakd_grpc_stream_messages_sent_total[1m]))'),
        record('target_method:soakd_grpc_stream_restarts:rate5m',
               'sum by (job, target, method) (rate(soakd_grpc_stream_restarts_total[5m]))'),
        record('target_method:soakd_grpc_stream_lifetime_ends:rate5m',
               'sum by (job, target, method) (rate(soakd_grpc_stream_lifetime_ends_total[5m]))'),
        summed_rate('soakd_grpc_stream_gap_seconds_bucket', '5m', 'le'),
        summed_rate('soakd_grpc_stream_silence_seconds_bucket', '5m', 'le'),
    ]),
    # WebSocket
    group('soakd-websocket', [
        summed_rate('soakd_ws_messages_sent_total', '1m'),
        summed_rate('soakd_ws_messages_received_total', '1m'),
        summed_rate('soakd_ws_closes_total', '1m', 'code'),
        summed_rate('soakd_ws_closes_total', '5m', comment="""
            Sockets the servers closed (any code), per second over 5 minutes:
            SoakdWebSocketsLost compares it with the sockets open."""),
        summed_rate('soakd_ws_ping_rtt_seconds_bucket', '5m', 'le'),
        p99_5m('soakd_ws_ping_rtt_seconds'),
        summed_rate('soakd_ws_message_duration_seconds_bucket', '5m', 'le'),
        p99_5m('soakd_ws_message_duration_seconds'),
    ]),
]


# ---------------------------------------------------------------------------
# Alerts (alerts.yml)
# ---------------------------------------------------------------------------
def alert(name, expr, for_, severity, summary, description):
    return {'alert': name, 'expr': expr, 'for': for_,
            'labels': {'severity': severity},
            'annotations': {'summary': summary, 'description': description}}


ALERTS_HEADER = """
Alerts for soakd. Needs rules.yml loaded as well (it records the
target:* series used below). Every alert is unit-tested in tests/: when you
change a threshold or a text (in grafana/mixin.py), update tests/ and run
  promtool check rules grafana/rules.yml grafana/alerts.yml
  promtool test rules grafana/tests/*.yml

soakd's scrape job is recognised by the job selector in grafana/mixin.py's
CONFIG (%(job_selector)s: SoakdDown, SoakdFdsNearLimit). The soakd_* metrics
need no job filter.
"""

ALERT_GROUPS = [
    group('soakd-slo', [
        record('soakd:request_duration_seconds:slo_p99',
               'vector(%(latency_slo)s)'),
    ], comment="""
        -------------------------------------------------------------------------
        THE LATENCY SLO: p99 request latency, in seconds, above which
        SoakdLatencyAboveSLO fires (latency_slo in grafana/mixin.py's CONFIG).
        The dashboard draws this line too.
        -------------------------------------------------------------------------"""),
    group('soakd-alerts', [
        alert('SoakdLatencyAboveDayAgo', """
            target:soakd_request_duration_seconds:p99_10m
              > %(day_ago_factor)s * target:soakd_request_duration_seconds:p99_10m_offset1d
            and
            target:soakd_request_duration_seconds:p99_10m > %(day_ago_floor)s
        """, '%(day_ago_for)s', 'warning',
            'soakd: p99 latency of {{ $labels.target }} is more than'
            ' %(day_ago_factor)s × what it was a day ago', """
            The p99 latency of {{ $labels.target }} (job {{ $labels.job }}, all soakd
            instances combined) over the last 10 minutes is {{ $value | humanizeDuration }},
            against {{ with printf "target:soakd_request_duration_seconds:p99_10m_offset1d{job=%%q,target=%%q}" $labels.job $labels.target | query }}{{ . | first | value | humanizeDuration }}{{ else }}(no baseline){{ end }}
            for the same 10 minutes one day earlier.
            A slow drift like this is what soaks are for: a leak, a growing table,
            fragmentation, GC or compaction in the server under test.
            Check on the soakd dashboard: the latency heatmap for when it began;
            the target process memory and fds for growth; schedule lag p99 (above %(lag_max_ms)s
            soakd itself is behind and the latency is not the target's); whether the
            load changed since yesterday (request rate, connections open).
            Then look at the server's own logs and metrics from that moment and profile
            it while it is slow."""),
        alert('SoakdLatencyRegression', """
            soakd_baseline_change_ratio{metric=~"p50|p99|p999"}
              and on (job, instance, target, metric) soakd_baseline_verdict == 1
              and on (job, instance, target) soakd_baseline_load_matches == 1
        """, '%(baseline_for)s', 'warning',
            'soakd: {{ $labels.metric }} latency of {{ $labels.target }} is'
            ' {{ $value | humanizePercentage }} above the baseline', """
            soakd at {{ $labels.instance }} (job {{ $labels.job }}) has judged the {{ $labels.metric }}
            latency of {{ $labels.target }} worse than its --baseline run in every --baseline-window
            for %(baseline_for_words)s: now {{ $value | humanizePercentage }} above the baseline's
            {{ $q := "0.5" }}{{ if eq $labels.metric "p99" }}{{ $q = "0.99" }}{{ else if eq $labels.metric "p999" }}{{ $q = "0.999" }}{{ end }}{{ with printf "soakd_baseline_latency_seconds{job=%%q,instance=%%q,target=%%q,quantile=%%q}" $labels.job $labels.instance $labels.target $q | query }}{{ . | first | value | humanizeDuration }}{{ else }}figure{{ end }}.
            The verdict is soakd compare's: beyond the tolerance and the 1 ms floor, a shift
            the rank test finds in the window's intervals, and not explained by soakd's own
            schedule lag. The build under test is slower than the last good one.
            Check on the soakd dashboard (Against the baseline) when the verdict turned and
            which quantiles moved; the run's report names the first worse window. Compare the
            builds' changes from that moment, profile the server while it is slow, and stop
            the soak if it is a release candidate (--abort-on-fail does it for you)."""),
        alert('SoakdThroughputRegression', """
            -soakd_baseline_change_ratio{metric="rps"}
              and on (job, instance, target, metric) soakd_baseline_verdict == 1
              and on (job, instance, target) soakd_baseline_load_matches == 1
        """, '%(baseline_for)s', 'warning',
            'soakd: {{ $labels.target }} completes {{ $value | humanizePercentage }}'
            ' fewer requests/s than the baseline', """
            soakd at {{ $labels.instance }} (job {{ $labels.job }}) has judged the completed
            requests per second of {{ $labels.target }} worse than its --baseline run in every
            --baseline-window for %(baseline_for_words)s: {{ $value | humanizePercentage }} fewer
            than the baseline's
            {{ with printf "soakd_baseline_requests_per_second{job=%%q,instance=%%q,target=%%q}" $labels.job $labels.instance $labels.target | query }}{{ . | first | value | humanize }}/s{{ else }}rate{{ end }},
            under the same load (the baseline's connections, pace and protocol). With a
            paced or open-loop load the rate is set by soakd, so fewer completions mean
            requests lost (errors, timeouts) or held (responses slower than the pace
            allows): check the error ratio, timeouts and connections open on the
            dashboard. In closed loop, fewer completions are slower responses."""),
        alert('SoakdLatencyAboveSLO', """
            target:soakd_request_duration_seconds:p99_5m
              > on () group_left () soakd:request_duration_seconds:slo_p99
        """, '%(latency_slo_for)s', 'critical',
            'soakd: p99 latency of {{ $labels.target }} is above the SLO', """
            The p99 latency of {{ $labels.target }} (job {{ $labels.job }}, all soakd
            instances combined) over 5 minutes is {{ $value | humanizeDuration }}, above the
            SLO of {{ with query "soakd:request_duration_seconds:slo_p99" }}{{ . | first | value | humanizeDuration }}{{ end }}.
            Check on the soakd dashboard: whether errors or timeouts rose at the same
            time, the latency heatmap (the whole distribution moved, or a slow tail
            appeared), schedule lag p99 (above %(lag_max_ms)s the generator is saturated and
            this figure is not the target's), and the target process CPU and memory.
            To change the SLO, edit latency_slo in CONFIG at the top of
            grafana/mixin.py, run it, and update the expected values in grafana/tests/."""),
        alert('SoakdErrorRatioHigh',
              'target:soakd_error_ratio:rate5m > %(error_ratio)s',
              '%(error_ratio_for)s', 'critical',
              'soakd: {{ $value | humanizePercentage }} of requests to'
              ' {{ $labels.target }} fail', """
            Over 5 minutes {{ $value | humanizePercentage }} of the requests and connect
            attempts of soakd (job {{ $labels.job }}) against {{ $labels.target }} failed
            (threshold %(error_ratio_pct)s). Check the dashboard's "Errors by kind" panel.
            addr_unavailable and fd_limit are limits of the soakd host, not faults of the
            target: add --source-addr addresses, widen net.ipv4.ip_local_port_range or
            raise the open-file limit first.
            connect_refused, connect_timeout and connect_other mean the target is down or
            its accept backlog is full; reset and eof mean it drops connections with
            requests owed; timeout means responses take longer than --request-timeout;
            protocol means malformed responses.
            Then read the target's logs from when the errors started."""),
        alert('SoakdCheckFailures', """
            target_request:soakd_check_failures:rate5m
              / target_request:soakd_responses:rate5m > %(check_ratio)s
        """, '%(check_for)s', 'warning',
            'soakd: {{ $value | humanizePercentage }} of the answers to'
            ' {{ $labels.request }} of {{ $labels.target }} fail a check', """
            Over 5 minutes {{ $value | humanizePercentage }} of the responses to request
            {{ $labels.request }} of {{ $labels.target }} (job {{ $labels.job }}) failed a
            check configured for it (threshold %(check_ratio_pct)s): a wrong status, a
            missing or different header, a body without the expected text, or a body
            too long. The server answers, but not what it should: an error page with
            200, a cache or a dependency failing. Check the dashboard's "Check
            failures by request" panel for which check, then the server's logs for
            that endpoint. (A response failing two checks counts twice.)"""),
        alert('SoakdConnectionsBelowDesired', """
            target:soakd_connections_open:sum / target:soakd_connections_desired:sum < %(connections_ratio)s
        """, '%(connections_for)s', 'warning',
            'soakd holds only {{ $value | humanizePercentage }} of the'
            ' connections wanted to {{ $labels.target }}', """
            soakd (job {{ $labels.job }}, all instances) holds {{ $value | humanizePercentage }}
            of the connections its plan wants to {{ $labels.target }} and has for %(connections_for_words)s
            (threshold %(connections_ratio_pct)s), so the target sees less load than planned.
            Check on the dashboard: connections by state (a growing backoff means the target
            refuses or drops connections; many stuck in connecting, a full accept backlog),
            the connect failures by kind and the close reasons. addr_unavailable or fd_limit
            errors are soakd host limits: add --source-addr addresses, widen the local
            port range or raise the open-file limit. Otherwise look at the target's
            connection limits (worker_connections, maxconn, its own ulimit -n) and logs."""),
        alert('SoakdGeneratorSaturated',
              'target:soakd_schedule_lag_seconds:p99_5m > %(lag_max)s',
              '%(lag_for)s', 'warning',
              'soakd is saturated: it sends requests to {{ $labels.target }}'
              ' {{ $value | humanizeDuration }} late (p99)', """
            The p99 schedule lag (due time to written) of soakd (job {{ $labels.job }})
            for {{ $labels.target }} is {{ $value | humanizeDuration }} over 5 minutes, above
            %(lag_max_ms)s. This measures the load generator, not the target: while it lasts, soakd's
            latency figures are not trustworthy.
            Check on the dashboard: connections in backoff (requests of slots waiting to
            reconnect count as late too; if backoff is high, fix the connections first) and
            soakd's CPU per instance (close to its thread count in cores means saturated).
            Then give soakd more CPU (more threads with -t, a bigger or quieter host),
            spread the load over more soakd instances, or lower -c or -r."""),
        alert('SoakdDown', """
            up{%(job_selector)s} == 0
            or
            absent(up{%(job_selector)s})
        """, '%(down_for)s', 'critical',
            '{{ if $labels.instance }}soakd {{ $labels.instance }} is down'
            '{{ else }}no soakd instance is scraped{{ end }}', """
            {{ if $labels.instance }}Prometheus cannot scrape soakd at {{ $labels.instance }}
            (job {{ $labels.job }}){{ else }}Prometheus has no scrape target in
            %(job_selector_text)s{{ end }}, so the soak is not measured.
            If the run ended on purpose (-d or -n), silence this alert or remove the target.
            Otherwise check whether the soakd process runs (systemctl status, journalctl,
            its exit code: 2 is a preflight failure, 1 an internal one), whether
            --metrics-listen is reachable from Prometheus (the default 127.0.0.1:9469
            answers on loopback only) and the scrape error on Prometheus's targets page.
            Restart the soak or fix the listen address or the scrape config."""),
        alert('SoakdThresholdFailing', 'soakd_threshold_passing == 0',
              '%(threshold_for)s', 'warning',
              'soakd {{ $labels.instance }}: threshold {{ $labels.threshold }}'
              ' fails for {{ if eq $labels.target "*" }}all workloads{{ else }}{{ $labels.target }}{{ end }}',
              """
            soakd at {{ $labels.instance }} (job {{ $labels.job }}) judges the threshold
            {{ $labels.threshold }} (given with --threshold or thresholds in its config) failing for
            {{ if eq $labels.target "*" }}all its workloads together{{ else }}{{ $labels.target }}{{ end }},
            over its --threshold-window (the whole run by default). Unless it recovers, the
            run will end with exit code 3; with --abort-on-fail it stops early.
            Check on the dashboard the figure the threshold names (latency quantiles, error
            ratio, requests/s, connections open) and when it crossed the limit, and the
            schedule lag p99 (above %(lag_max_ms)s soakd itself is behind and latencies are
            not the target's). docs/verdicts.md explains each threshold metric."""),
        alert('SoakdWatchdogFailing', 'soakd_healthy == 0',
              '%(watchdog_for)s', 'critical',
              'soakd {{ $labels.instance }}: a worker event loop is stalled',
              """
            soakd at {{ $labels.instance }} (job {{ $labels.job }}) reports soakd_healthy 0:
            at least one worker event loop has not checked in for more than 5 s, and
            /healthz answers 503. That loop's connections are not being served and this
            instance's figures are not trustworthy.
            Check soakd's CPU on the dashboard (a loop spinning at 100 %% of a core) and
            its log or journal. Capture the threads' stacks for a bug report
            (gdb -p PID -batch -ex "thread apply all bt"), then restart soakd."""),
        alert('SoakdFdsNearLimit', """
            process_open_fds{%(job_selector)s} / process_max_fds{%(job_selector)s} > %(fds_ratio)s
        """, '%(fds_for)s', 'warning',
            'soakd {{ $labels.instance }} uses {{ $value | humanizePercentage }}'
            ' of its open-file limit', """
            soakd at {{ $labels.instance }} (job {{ $labels.job }}) has {{ $value | humanizePercentage }}
            of its file descriptors in use (threshold %(fds_ratio_pct)s). When they run out, new
            connections fail with fd_limit errors.
            Check whether open fds follow the connections wanted (one per connection plus
            a few) or keep growing while connections stay flat (a leak: report it).
            To make room, raise the hard limit (LimitNOFILE= in the systemd unit,
            ulimit -Hn, /etc/security/limits.conf) and restart soakd, which raises its soft
            limit to the hard limit at start; or lower -c."""),
        alert('SoakdTargetMemoryGrowing', """
            deriv(soakd_target_process_resident_memory_bytes[1h]) * 3600 > %(memory_growth_per_hour)s
            and
            soakd_target_process_resident_memory_bytes
              - soakd_target_process_resident_memory_bytes offset 1h > %(memory_growth_per_hour)s / 2
        """, '%(memory_growth_for)s', 'warning',
            'soakd: the server under test (pid {{ $labels.pid }}) grows its memory by'
            ' {{ $value | humanize1024 }}B an hour', """
            The resident memory of process {{ $labels.pid }} of {{ $labels.target }} (watched by
            soakd at {{ $labels.instance }} with --target-pid) has grown at {{ $value | humanize1024 }}B
            per hour over the last hour (least squares, deriv) and by more than half of
            %(memory_growth_per_hour)s bytes since an hour ago, for %(memory_growth_for_words)s.
            After warm-up a server's memory should be flat: this is a leak until shown
            otherwise. The run's report gives the robust figure (trends, target_rss_slope,
            Theil-Sen with a significance test); fail the soak on it with
            --threshold 'target_rss_slope<=10MiB/h'."""),
        alert('SoakdServerLeak', """
            soakd_watch_slope_per_second * 3600 / soakd_watch_value > %(server_growth_ratio_per_hour)s
              and soakd_watch_slope_significant == 1
        """, '%(server_growth_for)s', 'warning',
            'soakd: the server\'s {{ $labels.watch }} ({{ $labels.series }}) grows'
            ' {{ $value | humanizePercentage }} an hour', """
            soakd at {{ $labels.instance }} (job {{ $labels.job }}) reads the server's
            {{ $labels.watch }} from {{ $labels.series }} and finds it growing by
            {{ $value | humanizePercentage }} of its value an hour (Theil-Sen slope over the
            steady part, significant by Mann-Kendall corrected for autocorrelation, fitted
            between the server's restarts), for %(server_growth_for_words)s. After warm-up a
            server's memory, descriptors and goroutines should be flat: this is a leak until
            shown otherwise. The run's report has the series (server section: slope with its
            confidence interval, drift, restarts); fail the soak on it with a threshold such
            as --threshold 'slope({{ $labels.watch }})<=1MiB/h', and profile the server (heap
            dump, lsof) while it grows."""),
        alert('SoakdLatencyDrifting', """
            target:soakd_request_duration_seconds:p99_10m
              > %(drift_factor)s * target:soakd_request_duration_seconds:p99_10m_offset1h
            and
            target:soakd_request_duration_seconds:p99_10m > %(drift_floor)s
        """, '%(drift_for)s', 'warning',
            'soakd: p99 latency of {{ $labels.target }} is more than'
            ' %(drift_factor)s × what it was an hour ago', """
            The p99 latency of {{ $labels.target }} (job {{ $labels.job }}, all soakd
            instances combined) over the last 10 minutes is {{ $value | humanizeDuration }},
            more than %(drift_factor)s × the same 10 minutes one hour earlier and above
            %(drift_floor_ms)s, for %(drift_for_words)s: the server slows down as the soak goes
            on (a growing queue, cache or heap). The run's report gives the drift with a rank
            test (trends, p99_drift); fail the soak on it with --threshold 'p99_drift<=20%%'."""),
        # WebSocket
        alert('SoakdWebSocketsLost', """
            60 * target:soakd_ws_closes:rate5m
              / target:soakd_connections_open:sum
              > %(ws_lost_ratio_per_min)s
        """, '%(ws_lost_for)s', 'warning',
            'soakd: the servers of {{ $labels.target }} close more than'
            ' %(ws_lost_ratio_per_min_pct)s of its WebSockets a minute', """
            Over the last 5 minutes the servers behind {{ $labels.target }} (job
            {{ $labels.job }}, all soakd instances combined) closed
            {{ $value | humanizePercentage }} of the open WebSockets per minute, above
            %(ws_lost_ratio_per_min_pct)s for %(ws_lost_for_words)s. soakd reconnects each
            one, so the sockets-open line may look fine while users would be dropped.
            Check the dashboard's Closes by code panel: going_away or service_restart
            are deploys or restarts; internal_error (1011) the server failing; abnormal
            or no close frame a proxy or load balancer timing idle sockets out (compare
            its idle timeout with --ws-ping); message_too_big a limit lower than the
            messages sent."""),
        # Outages
        alert('SoakdOutage', """
            max by (job, target) (soakd_outage_active) == 1
        """, '%(outage_for)s', 'critical',
            'soakd: {{ $labels.target }} is in an outage', """
            soakd finds {{ $labels.target }} (job {{ $labels.job }}) in an outage, for
            %(outage_for_words)s at least: in every second more than --outage-errors of
            its requests and connects fail, or fewer than --outage-open of the desired
            connections are open (soakd's rules, default 5 %% and 90 %%). soakd keeps a few
            connections probing, so the outage ends within a second of the server
            answering again. The report lists each outage with what it cost and the
            event it is attributed to (a deploy soakd ran, or one marked by SIGUSR2 or
            --event-socket): check the dashboard's events annotations and the server's
            logs from that moment."""),
        alert('SoakdEventFailed', """
            sum by (job, name) (increase(soakd_event_failures_total[5m])) > 0
        """, '0m', 'warning',
            'soakd: the event {{ $labels.name }} failed', """
            An event command soakd ran (job {{ $labels.job }}, [[event]] or --event
            {{ $labels.name }}) did not exit 0 in the last 5 minutes: a non-zero exit, a
            signal, its time limit, or it could not start. The soak goes on, but the
            disruption it was to cause may not have happened as planned: the command's
            output is in soakd's event log (--event-log), its status in the report's
            events."""),
        # gRPC
        alert('SoakdGrpcErrorRatio',
              'target_method:soakd_grpc_non_ok_ratio:rate5m > %(grpc_error_ratio)s',
              '%(grpc_error_ratio_for)s', 'warning',
              'soakd: {{ $value | humanizePercentage }} of the gRPC calls to'
              ' {{ $labels.method }} of {{ $labels.target }} end non-OK', """
            Over 5 minutes {{ $value | humanizePercentage }} of the gRPC calls soakd (job
            {{ $labels.job }}, all instances combined) made to {{ $labels.method }} of
            {{ $labels.target }} ended with a status other than OK, above
            %(grpc_error_ratio_pct)s for %(grpc_error_ratio_for_words)s. The dashboard's gRPC
            row has the codes: unavailable (the server shedding load or restarting; connection
            ageing alone never shows here, soakd sends those calls again), deadline_exceeded
            (the server's own deadline, from grpc-timeout), resource_exhausted (its limits),
            internal or unknown (the handler failing). Read the server's logs from when the
            ratio started to rise."""),
        # HTTP/2
        alert('SoakdH2GoawayError', """
            sum by (job, target, code) (increase(soakd_h2_goaways_total{code!="NO_ERROR"}[5m])) > 0
        """, '%(goaway_error_for)s', 'warning',
            'soakd: {{ $labels.target }} sent GOAWAY with {{ $labels.code }}', """
            Servers of {{ $labels.target }} (job {{ $labels.job }}, all soakd instances
            combined) sent {{ $value | humanize }} HTTP/2 GOAWAY frames with the error code
            {{ $labels.code }} in the last 5 minutes. A graceful GOAWAY (NO_ERROR) is routine
            and not alerted on; one with an error code means the server gave up on the
            connection: PROTOCOL_ERROR or COMPRESSION_ERROR (a bug on one side: capture the
            frames), ENHANCE_YOUR_CALM (the server thinks it is being flooded: its limits on
            streams, resets or pings), INTERNAL_ERROR (the server failed). Streams above the
            GOAWAY's last stream are sent again; the ones it cut count as goaway_error.
            Check the dashboard's HTTP/2 row and the server's logs from that moment."""),
    ]),
]


# ---------------------------------------------------------------------------
# YAML text for the rule files: a fixed shape, so a small writer will do.
# ---------------------------------------------------------------------------
YAML_RESERVED = {'true', 'false', 'yes', 'no', 'on', 'off', 'null', 'y', 'n'}


def lines_of(text):
    """A string written over several source lines: its lines, dedented,
    without the blank first and last ones."""
    return textwrap.dedent(text).strip('\n').split('\n')


def yaml_value(value, indent, style):
    """`value` as YAML, to follow `key:` on a line indented by `indent`.
    style: 'folded' (one paragraph, wrapped as in the source), 'quoted', or
    None: plain when that is safe, otherwise a literal block for text that
    spans source lines and double quotes (JSON escapes) for the rest."""
    pad = ' ' * (indent + 2)
    if style == 'folded':
        lines = [line.strip() for line in lines_of(value)]
        if ' '.join(lines) != ' '.join(value.split()) or '' in lines:
            raise ValueError('not one paragraph: %r' % value)
        return ' >-\n' + ''.join(pad + line + '\n' for line in lines)
    if '\n' in value and style is None:
        lines = lines_of(value)
        return ' |\n' + ''.join(pad + line + '\n' for line in lines)
    plain = (re.fullmatch(r'[A-Za-z_(][^\t\n]*|(\d+[smhdwy])+', value)
             and ': ' not in value and ' #' not in value
             and not value.endswith((' ', ':'))
             and value.lower() not in YAML_RESERVED)
    if plain and style is None:
        return ' ' + value + '\n'
    return ' ' + json.dumps(value, ensure_ascii=False) + '\n'


def yaml_comment(text, indent):
    return ''.join(' ' * indent + ('# ' + line).rstrip() + '\n'
                   for line in lines_of(text))


def rule_file(header, groups):
    top = GENERATED.strip('\n') + '\n\n' + (header % V).strip('\n')
    out = [yaml_comment(top, 0), '\ngroups:\n']
    for i, g in enumerate(groups):
        if i:
            out.append('\n')
        if g['comment']:
            out.append(yaml_comment(g['comment'], 2))
        out.append('  - name: %s\n    rules:\n' % g['name'])
        for j, r in enumerate(g['rules']):
            if 'alert' in r and j:
                out.append('\n')
            if r.get('comment'):
                out.append(yaml_comment(r['comment'], 6))
            first = '      - '
            for key in ('record', 'alert', 'expr', 'for'):
                if key in r:
                    out.append(first + key + ':' + yaml_value(r[key] % V, 8, None))
                    first = '        '
            if 'labels' in r:
                out.append('        labels:\n')
                for k, v in r['labels'].items():
                    out.append('          ' + k + ':' + yaml_value(v % V, 10, None))
                out.append('        annotations:\n')
                out.append('          summary:' + yaml_value(
                    r['annotations']['summary'] % V, 10, 'quoted'))
                out.append('          description:' + yaml_value(
                    r['annotations']['description'] % V, 10, 'folded'))
    return ''.join(out)


GENERATED = """
GENERATED by grafana/mixin.py from its source and CONFIG: do not edit this
file. Change grafana/mixin.py and run `python3 grafana/mixin.py`;
scripts/test.sh fails while the two disagree (`python3 grafana/mixin.py --check`).
"""


# ---------------------------------------------------------------------------
def outputs():
    """{path relative to grafana/: text} for every generated file."""
    return {
        'dashboards/soakd.json':
            json.dumps(dashboard(), indent=2, ensure_ascii=False) + '\n',
        'rules.yml': rule_file(RULES_HEADER, RULE_GROUPS),
        'alerts.yml': rule_file(ALERTS_HEADER, ALERT_GROUPS),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--check', action='store_true',
                        help='write nothing; exit 1 if a generated file is '
                             'not what this script would write')
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    generated = outputs()
    stale = []
    for name, text in generated.items():
        path = os.path.join(here, name)
        shown = os.path.relpath(path, os.path.dirname(here))
        try:
            with open(path, encoding='utf-8', newline='') as f:
                old = f.read()
        except FileNotFoundError:
            old = None
        if old == text:
            continue
        stale.append(shown)
        if args.check:
            diff = list(difflib.unified_diff(
                (old or '').splitlines(), text.splitlines(),
                shown + ' (committed)', shown + ' (generated)', lineterm=''))
            print('\n'.join(diff[:40] + (['...'] if len(diff) > 40 else [])),
                  file=sys.stderr)
        else:
            with open(path, 'w', encoding='utf-8', newline='\n') as f:
                f.write(text)
            print('wrote ' + shown)
    if args.check and stale:
        print('\ngrafana/mixin.py --check: stale, not what grafana/mixin.py '
              'generates: %s\nRun `python3 grafana/mixin.py` and commit the '
              'result; do not edit generated files by hand.'
              % ', '.join(stale), file=sys.stderr)
        return 1
    if not stale:
        print('grafana/mixin.py: %s up to date' % ', '.join(
            'grafana/' + n for n in generated))
    return 0


if __name__ == '__main__':
    sys.exit(main())
