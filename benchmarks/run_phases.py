"""Where a `tensorscope run -o` of a program spends its CPU time, phase by phase, in one process.

Usage::

    python benchmarks/run_phases.py plain|ts PROGRAM

Prints one line on stderr: CPU seconds (``time.process_time``) of importing torch, then for ``ts``
importing the command line, the set-up until the program starts, the program itself, the snapshot
after it (``recorded``), building the report (``build``), writing it (``emit``) and what follows;
for ``plain`` the program run with ``runpy``. Run both a few times and compare the ``program`` phases
(other load only ever adds time: read the minimum). The report goes to /tmp/run_phases_report.json.
"""
import sys, time, os, runpy
pt = time.process_time
T = {}
T['start'] = pt()
import torch
T['torch'] = pt()
mode, prog = sys.argv[1], sys.argv[2]
if mode == 'plain':
    sys.argv = [prog]
    T['prog0'] = pt()
    try:
        runpy.run_path(prog, run_name='__main__')
    except SystemExit:
        pass
    T['prog1'] = pt()
else:
    import tensorscope.cli as cli
    T['cli'] = pt()
    from tensorscope import runner, session as sess
    orig_exec = runner._execute
    def _execute(*a, **k):
        T['prog0'] = pt()
        try:
            return orig_exec(*a, **k)
        finally:
            T['prog1'] = pt()
    runner._execute = _execute
    orig_rec = sess._recorded
    def _recorded(*a, **k):
        T['rec0'] = pt()
        try:
            return orig_rec(*a, **k)
        finally:
            T['rec1'] = pt()
    sess._recorded = _recorded
    orig_emit = cli._emit
    def _emit(*a, **k):
        T['emit0'] = pt()
        try:
            return orig_emit(*a, **k)
        finally:
            T['emit1'] = pt()
    cli._emit = _emit
    sys.argv = ['tensorscope', 'run', '-o', '/tmp/run_phases_report.json', prog]
    try:
        cli.main()
    except SystemExit:
        pass
T['end'] = pt()
out = {'torch': T['torch'] - T['start']}
if mode == 'plain':
    out['program'] = T['prog1'] - T['prog0']
else:
    out['cli_import'] = T['cli'] - T['torch']
    out['setup'] = T['prog0'] - T['cli']
    out['program'] = T['prog1'] - T['prog0']
    out['after_prog'] = T['rec0'] - T['prog1']
    out['recorded'] = T['rec1'] - T['rec0']
    out['build'] = T['emit0'] - T['rec1']
    out['emit'] = T['emit1'] - T['emit0']
    out['exit'] = T['end'] - T['emit1']
out['total'] = T['end'] - T['start']
sys.stderr.write('PHASES ' + mode + ' ' + ' '.join(f'{k}={v:.3f}' for k, v in out.items()) + '\n')
