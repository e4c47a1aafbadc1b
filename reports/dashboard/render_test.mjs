// The dashboard in a real browser: `bitparity report --html` on the fixtures of testdata/, each
// page loaded by headless Chromium, its DOM dumped once the scripts have run, and checked here:
//   - no script error (the page lists them in #script-errors; Chromium's log shows uncaught ones
//     and any script or resource that the page's Content-Security-Policy refused),
//   - every section present, and each chart drawn: an SVG with the number of marks its fixture
//     gives (bars, cells, points counted by hand from testdata/),
//   - the hostile fixtures (markup in op names, messages, provenance, kernel names) stay text:
//     no element, script or attribute of theirs reaches the DOM.
// Usage: node render_test.mjs --bitparity BIN --chromium CHROMIUM --testdata DIR --work DIR
import {spawnSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const SECTIONS = ['bench', 'latest', 'findings', 'ulp', 'corpus', 'coverage'];
// How long the page may run (virtual time: Chromium fast-forwards timers) and the process (real).
const VIRTUAL_TIME_MS = 30000;
const CHROMIUM_TIMEOUT_MS = 120000;

function args() {
  const out = {};
  const argv = process.argv.slice(2);
  for (let i = 0; i + 1 < argv.length; i += 2) out[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const key of ['bitparity', 'chromium', 'testdata', 'work'])
    if (!out[key]) throw new Error(`missing --${key}; usage: render_test.mjs --bitparity BIN --chromium C --testdata D --work W`);
  return out;
}

const failures = [];
function check(ok, what) {
  if (!ok) failures.push(what);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
}

function run(command, argv, options = {}) {
  const r = spawnSync(command, argv, {encoding: 'utf8', maxBuffer: 256 << 20, ...options});
  if (r.error) throw new Error(`${command}: ${r.error.message}` +
                               (r.error.code === 'ENOENT' ? ' (scripts/setup.sh installs it)' : ''));
  return r;
}

function writePage(opt, name, flags) {
  const out = path.join(opt.work, `${name}.html`);
  const r = run(opt.bitparity, ['report', '--html', out, ...flags]);
  if (r.status !== 0) throw new Error(`bitparity report for ${name} exited ${r.status}: ${r.stderr}`);
  return out;
}

function renderPage(opt, file) {
  const r = run(opt.chromium, [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--disable-extensions', '--enable-logging=stderr', '--v=0', `--user-data-dir=${path.join(opt.work, 'profile')}`,
    `--virtual-time-budget=${VIRTUAL_TIME_MS}`, '--dump-dom', pathToFileURL(file).href,
  ], {timeout: CHROMIUM_TIMEOUT_MS});
  if (r.status !== 0) throw new Error(`chromium exited ${r.status} on ${file}: ${r.stderr.slice(-2000)}`);
  fs.writeFileSync(file.replace(/\.html$/, '.dom.html'), r.stdout);  // kept for a look when a check fails
  // Script elements hold the inlined libraries: markup is looked for in the rest of the document.
  const outsideScripts = r.stdout.replace(/<script\b[^>]*>[\s\S]*?<\/script>/g, '<script></script>');
  return {dom: outsideScripts, log: r.stderr};
}

// The content of the element that starts at `start` (an opening tag of `tag`), nested tags counted.
function elementAt(dom, start, tag) {
  const re = new RegExp(`<(/?)${tag}\\b[^>]*>`, 'g');
  re.lastIndex = start;
  let depth = 0, m;
  while ((m = re.exec(dom))) {
    depth += m[1] ? -1 : 1;
    if (depth === 0) return dom.slice(start, re.lastIndex);
  }
  return dom.slice(start);
}

function chartHtml(dom, name) {
  const start = dom.search(new RegExp(`<div class="chart[^"]*"[^>]*data-chart="${name}"`));
  return start < 0 ? null : elementAt(dom, start, 'div');
}

// Vega draws each data mark's items in a <g class="mark-TYPE role-mark ..."> group: count them.
function marks(html, type) {
  let n = 0;
  const re = new RegExp(`<g class="mark-${type} role-mark[^"]*"[^>]*>`, 'g');
  let m;
  while ((m = re.exec(html))) {
    const group = elementAt(html, m.index, 'g');
    n += (group.match(/<(path|line|text|rect)\b/g) || []).length;
  }
  return n;
}

function commonChecks(name, page, expectedCharts) {
  const {dom, log} = page;
  const errors = dom.match(/<ul id="script-errors"[^>]*>([\s\S]*?)<\/ul>/);
  check(errors && !/<li/.test(errors[1]), `${name}: no script error listed on the page` +
        (errors && /<li/.test(errors[1]) ? `: ${errors[1].replace(/<[^>]+>/g, ' ').trim()}` : ''));
  const uncaught = log.split('\n').filter((l) => /Uncaught|Refused to|CONSOLE.*error/i.test(l));
  check(uncaught.length === 0, `${name}: no uncaught error or CSP refusal in Chromium's log` +
        (uncaught.length ? `: ${uncaught.slice(0, 3).join(' | ')}` : ''));
  for (const id of SECTIONS) check(new RegExp(`<section id="${id}">`).test(dom), `${name}: section #${id} present`);
  const done = dom.match(/<body[^>]*data-charts-done="(\d+)"/);
  check(done && Number(done[1]) === expectedCharts,
        `${name}: the script ran to its end and drew ${expectedCharts} chart(s) (data-charts-done=${done ? done[1] : 'absent'})`);
}

function chartChecks(name, dom, expected) {
  for (const [chart, counts] of Object.entries(expected)) {
    const html = chartHtml(dom, chart);
    check(html !== null, `${name}: chart ${chart} present`);
    if (html === null) continue;
    check(/data-rendered="true"/.test(html) && /<svg\b/.test(html), `${name}: chart ${chart} rendered as SVG`);
    for (const [type, n] of Object.entries(counts)) {
      const got = marks(html, type);
      check(n === '>0' ? got > 0 : got === n, `${name}: chart ${chart} has ${n} ${type} mark item(s) (got ${got})`);
    }
  }
}

function main() {
  const opt = args();
  fs.rmSync(opt.work, {recursive: true, force: true});
  fs.mkdirSync(opt.work, {recursive: true});
  const data = (...p) => path.join(opt.testdata, ...p);

  // Every source: the counts are those of testdata/ (see dashboard_test.cpp for the same by hand).
  const full = renderPage(opt, writePage(opt, 'full', ['--report', data('report.json'), '--bench-history',
                                                       data('bench'), '--corpus', data('corpus')]));
  commonChecks('full', full, 4);
  chartChecks('full', full.dom, {
    bench: {symbol: 6, line: 2, rule: 1},  // 2 kernels x 3 runs, one line per kernel, the roofline
    findings: {rect: 4},                    // (op, pair, kind) groups of report.json
    ulp: {rect: 7},                         // non-empty ulp buckets over the three pairs
    coverage: {rect: 8, text: 8},           // 5 classes of swiglu bwd (one required, unreached), 3 of swiglu_scale
  });
  check(/roofline \(100 %\)/.test(full.dom), 'full: the roofline is labelled');

  // No source at all: every section says what is missing, and nothing is drawn.
  const empty = renderPage(opt, writePage(opt, 'empty', []));
  commonChecks('empty', empty, 0);
  check((empty.dom.match(/<p class="missing">/g) || []).length === SECTIONS.length,
        'empty: each section says its source is missing');

  // Hostile strings: still drawn, never markup.
  const hostile = renderPage(opt, writePage(opt, 'hostile', ['--report', data('hostile', 'report.json'),
                                                             '--bench-history', data('hostile', 'bench'),
                                                             '--corpus', data('hostile', 'corpus')]));
  commonChecks('hostile', hostile, 4);
  chartChecks('hostile', hostile.dom, {bench: {symbol: '>0'}, findings: {rect: '>0'}, ulp: {rect: '>0'},
                                       coverage: {rect: '>0'}});
  const title = hostile.dom.match(/<title>([\s\S]*?)<\/title>/);
  check(title && !/PWNED/.test(title[1]), 'hostile: no injected script ran (the title is unchanged)');
  check(!/\sdata-pwned=/.test(hostile.dom), 'hostile: no injected event handler ran');
  check(!/<img\b/i.test(hostile.dom) && !/<b>bold/.test(hostile.dom), 'hostile: no injected element in the DOM');
  check(/&lt;\/script&gt;&lt;script&gt;document\.title=/.test(hostile.dom), 'hostile: the strings show as text');

  if (failures.length) {
    console.log(`\n${failures.length} check(s) failed; the pages are in ${opt.work}`);
    process.exit(1);
  }
  console.log('\nall checks passed');
}

try {
  main();
} catch (e) {
  console.error(`render_test: ${e.message}`);
  process.exit(1);
}
