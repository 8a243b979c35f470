// The script editor of script (GLUE) jobs: the job's <textarea> stays the
// form control (its value is what is saved), with the script shown
// highlighted in a <pre> laid exactly under it (the textarea's text is
// transparent, its caret and selection are not). One small tokenizer per
// script type, regex-based and in a single pass; the highlighted copy is
// built from text nodes and <span class="tok-…"> elements only, so no
// script text is ever parsed as HTML. Also the starter script of each
// type. Imports nothing of the console but its languages (i18n.js).

import { t } from './i18n.js';

// ---- starter scripts ----

/** A starter script per script type. rondo runs a script as
 *  `<interpreter> <file> <params> <shard index> <shard total>` (XXL-JOB's
 *  convention), so the params are the script's first argument; exit
 *  status 0 is success. GLUE_GROOVY runs only in XXL-JOB's own executors. */
export const TEMPLATES = {
  GLUE_SHELL: `#!/bin/sh
# A rondo script job, run with sh. Arguments: $1 = the job's params,
# $2 = this run's shard index, $3 = the shard total (also in the
# environment: RONDO_PARAMS, RONDO_SHARD_INDEX, RONDO_SHARD_TOTAL).
echo "rondo: hello from a shell job"
echo "params: \${1:-(none)}"
echo "shard: $2 of $3"

# Exit status 0 marks the run a success; anything else, a failure.
exit 0
`,
  GLUE_PYTHON: `#!/usr/bin/env python3
# A rondo script job, run with python3. sys.argv[1] = the job's params,
# sys.argv[2] = this run's shard index, sys.argv[3] = the shard total.
import sys

params = sys.argv[1] if len(sys.argv) > 1 else ""
shard_index = int(sys.argv[2]) if len(sys.argv) > 2 else 0
shard_total = int(sys.argv[3]) if len(sys.argv) > 3 else 1

print("rondo: hello from a Python job")
print("params:", params or "(none)")
print(f"shard: {shard_index} of {shard_total}")

# Exit status 0 marks the run a success; anything else, a failure.
sys.exit(0)
`,
  GLUE_NODEJS: `// A rondo script job, run with node. process.argv[2] = the job's params,
// process.argv[3] = this run's shard index, process.argv[4] = the shard total.
const [params = '', shardIndex = '0', shardTotal = '1'] = process.argv.slice(2);

console.log('rondo: hello from a Node.js job');
console.log('params:', params || '(none)');
console.log(\`shard: \${shardIndex} of \${shardTotal}\`);

// Exit code 0 marks the run a success; anything else, a failure.
process.exit(0);
`,
  GLUE_POWERSHELL: `# A rondo script job, run with pwsh. $args[0] = the job's params,
# $args[1] = this run's shard index, $args[2] = the shard total.
$params, $shardIndex, $shardTotal = $args

Write-Output "rondo: hello from a PowerShell job"
if ($params) { Write-Output "params: $params" } else { Write-Output "params: (none)" }
Write-Output "shard: $shardIndex of $shardTotal"

# Exit code 0 marks the run a success; anything else, a failure.
exit 0
`,
  GLUE_PHP: `<?php
// A rondo script job, run with php. $argv[1] = the job's params,
// $argv[2] = this run's shard index, $argv[3] = the shard total.
$params = $argv[1] ?? '';
$shardIndex = (int) ($argv[2] ?? 0);
$shardTotal = (int) ($argv[3] ?? 1);

echo "rondo: hello from a PHP job\\n";
echo 'params: ' . ($params !== '' ? $params : '(none)') . "\\n";
echo "shard: $shardIndex of $shardTotal\\n";

// Exit status 0 marks the run a success; anything else, a failure.
exit(0);
`,
  GLUE_GROOVY: `package com.example.rondo;

import com.xxl.job.core.context.XxlJobHelper;
import com.xxl.job.core.handler.IJobHandler;

/**
 * A GLUE_GROOVY job: XXL-JOB's own executor (xxl-job-core) compiles this
 * class and calls execute(); rondo's executors do not run Groovy.
 */
public class HelloGlueJobHandler extends IJobHandler {

    @Override
    public void execute() throws Exception {
        XxlJobHelper.log("rondo: hello from a Groovy job");
        XxlJobHelper.log("params: " + XxlJobHelper.getJobParam());
        XxlJobHelper.log("shard: " + XxlJobHelper.getShardIndex() + " of " + XxlJobHelper.getShardTotal());
        XxlJobHelper.handleSuccess();
    }
}
`,
};

/** The starter script of `glueType` ('' for BEAN or an unknown type). */
export function templateFor(glueType) {
  return TEMPLATES[glueType] || '';
}

// ---- tokenizers ----

const words = (s) => new Set(s.trim().split(/\s+/));

// Shared pieces.
const SLASH_COMMENTS = String.raw`\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)`;
const SHEBANG = String.raw`^#![^\n]*`;
const QUOTED_LINE = String.raw`"(?:[^"\\\n]|\\[\s\S])*"?|'(?:[^'\\\n]|\\[\s\S])*'?`;
const TRIPLE = String.raw`"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)`;
const DECIMAL = String.raw`\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d[\d_]*)?`;
const RADIX = String.raw`0[xX][\da-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+`;
const LEADING_DOT = String.raw`(?<![\w$.])\.\d[\d_]*(?:[eE][+-]?\d[\d_]*)?`;

const SHELL_VAR = String.raw`\$(?:\{[^}\n]*\}?|[A-Za-z_]\w*|[\d#?$!@*-])`;
const PS_VAR = String.raw`\$(?:\{[^}\n]*\}?|[A-Za-z_]\w*(?::[A-Za-z_]\w*)?|[?^$_])`;
const PHP_VAR = String.raw`\$\{[^}\n]*\}?|\$[A-Za-z_]\w*`;

const PS_OPERATORS = 'eq ne gt ge lt le like notlike match notmatch contains notcontains in notin replace split'
  .split(' ').flatMap((op) => [`-${op}`, `-i${op}`, `-c${op}`]).join(' ');

/** A language: `rules` in the order they are tried, each [class, regex
 *  source] (class 'word' means "a keyword if in `keywords`, else plain");
 *  `interpolate`: by opening quote, the pieces of a string shown as
 *  variables (a piece starting with an escape character stays string). */
function language({ rules, keywords = '', caseless = false, interpolate = {} }) {
  const interp = {};
  for (const [quote, source] of Object.entries(interpolate)) interp[quote] = new RegExp(source, 'g');
  return {
    classes: rules.map(([cls]) => cls),
    re: new RegExp(rules.map(([, source]) => `(${source})`).join('|'), 'g'),
    keywords: words(caseless ? keywords.toLowerCase() : keywords),
    caseless,
    interp,
  };
}

const LANGUAGES = {
  GLUE_SHELL: language({
    rules: [
      ['comment', String.raw`(?<![^\s;&|()])#[^\n]*`],
      ['string', String.raw`\$'(?:[^'\\]|\\[\s\S])*'?|'[^']*'?|"(?:[^"\\]|\\[\s\S])*"?`],
      ['var', SHELL_VAR],
      ['number', String.raw`(?<![\w./-])\d+(?:\.\d+)?(?![\w./-])`],
      ['word', String.raw`(?<![\w./$-])[A-Za-z_][\w-]*`],
    ],
    keywords: `if then else elif fi case esac for select while until do done in function time
      return exit break continue local export readonly declare typeset unset shift set trap eval exec
      source alias unalias true false test echo printf read cd wait getopts umask`,
    interpolate: { '"': String.raw`\\[\s\S]|${SHELL_VAR}` },
  }),
  GLUE_PYTHON: language({
    rules: [
      ['comment', String.raw`#[^\n]*`],
      ['string', String.raw`(?:[rRbBuUfF]{1,2})?(?:${TRIPLE}|${QUOTED_LINE})`],
      ['number', String.raw`\b(?:${RADIX}|\d[\d_]*(?:\.[\d_]*)?(?:[eE][+-]?\d[\d_]*)?[jJ]?)|${LEADING_DOT}[jJ]?`],
      ['word', String.raw`[A-Za-z_]\w*`],
    ],
    keywords: `False None True and as assert async await break class continue def del elif else
      except finally for from global if import in is lambda nonlocal not or pass raise return try
      while with yield match case`,
  }),
  GLUE_NODEJS: language({
    rules: [
      ['comment', `${SHEBANG}|${SLASH_COMMENTS}`],
      ['string', String.raw`${QUOTED_LINE}|\x60(?:[^\x60\\]|\\[\s\S])*\x60?`],
      ['number', String.raw`\b(?:(?:${RADIX})n?|${DECIMAL}n?)|${LEADING_DOT}`],
      ['word', String.raw`[A-Za-z_$][\w$]*`],
    ],
    keywords: `break case catch class const continue debugger default delete do else export extends
      finally for function if import in instanceof new return super switch this throw try typeof
      var void while with yield let static async await of true false null undefined NaN Infinity`,
    interpolate: { '`': String.raw`\\[\s\S]|\$\{[^}\n]*\}?` },
  }),
  GLUE_POWERSHELL: language({
    rules: [
      ['comment', String.raw`<#[\s\S]*?(?:#>|$)|(?<![^\s;(){}|&])#[^\n]*`],
      ['string', String.raw`@"[\s\S]*?(?:\n"@|$)|@'[\s\S]*?(?:\n'@|$)|"(?:[^"\x60]|\x60[\s\S]|"")*"?|'(?:[^']|'')*'?`],
      ['var', PS_VAR],
      ['number', String.raw`\b(?:0[xX][\da-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?:[kKmMgGtTpP][bB])?[lLdD]?\b`],
      ['word', String.raw`-?[A-Za-z_][\w-]*`],
    ],
    keywords: `begin break catch class continue data define do dynamicparam else elseif end enum exit
      filter finally for foreach from function hidden if in param process return static switch
      throw trap try until using var while workflow parallel sequence
      -and -or -not -xor -band -bor -bxor -bnot -shl -shr -is -isnot -as -f -join ${PS_OPERATORS}`,
    caseless: true,
    interpolate: { '"': String.raw`\x60[\s\S]|${PS_VAR}` },
  }),
  GLUE_PHP: language({
    rules: [
      ['keyword', String.raw`<\?(?:php\b|=)?|\?>`],
      ['comment', String.raw`${SLASH_COMMENTS}|#(?!\[)[^\n]*`],
      ['string', String.raw`'(?:[^'\\]|\\[\s\S])*'?|"(?:[^"\\]|\\[\s\S])*"?`],
      ['var', PHP_VAR],
      ['number', String.raw`\b(?:${RADIX}|${DECIMAL})`],
      ['word', String.raw`[A-Za-z_]\w*`],
    ],
    keywords: `abstract and array as break callable case catch class clone const continue declare
      default do echo else elseif empty enddeclare endfor endforeach endif endswitch endwhile enum
      eval exit die extends final finally fn for foreach function global goto if implements include
      include_once instanceof insteadof interface isset list match namespace new or print private
      protected public readonly require require_once return static switch throw trait try unset use
      var while xor yield true false null self parent int float string bool void mixed`,
    caseless: true,
    interpolate: { '"': String.raw`\\[\s\S]|${PHP_VAR}` },
  }),
  GLUE_GROOVY: language({
    rules: [
      ['comment', `${SHEBANG}|${SLASH_COMMENTS}`],
      ['string', `${TRIPLE}|${QUOTED_LINE}`],
      ['keyword', String.raw`@[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*`],
      ['number', String.raw`\b(?:${RADIX}|${DECIMAL})[lLfFdDgGiI]?`],
      ['word', String.raw`[A-Za-z_$][\w$]*`],
    ],
    keywords: `abstract as assert boolean break byte case catch char class const continue def
      default do double else enum extends final finally float for goto if implements import in
      instanceof int interface long native new package private protected public return short static
      strictfp super switch synchronized this throw throws trait transient try var void volatile
      while true false null`,
    interpolate: { '"': String.raw`\\[\s\S]|\$\{[^}\n]*\}?|\$[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*` },
  }),
};

/** The tokens of `source` as a script of `glueType`: [class, text] pairs,
 *  class '' (plain) or comment, string, keyword, number, var. Their texts
 *  put together are `source`, exactly. Unknown types: one plain token. */
export function tokenize(source, glueType) {
  const lang = LANGUAGES[glueType];
  const out = [];
  if (!lang) {
    if (source) out.push(['', source]);
    return out;
  }
  const { re, classes, keywords, caseless, interp } = lang;
  let plainFrom = 0;
  const emit = (cls, from, to) => {
    if (from > plainFrom) out.push(['', source.slice(plainFrom, from)]);
    out.push([cls, source.slice(from, to)]);
    plainFrom = to;
  };
  re.lastIndex = 0;
  for (let m = re.exec(source); m; m = re.exec(source)) {
    const text = m[0];
    if (!text) { re.lastIndex++; continue; }
    let i = 1;
    while (m[i] === undefined) i++;
    let cls = classes[i - 1];
    const from = m.index;
    const to = from + text.length;
    if (cls === 'word') {
      if (!keywords.has(caseless ? text.toLowerCase() : text)) continue;
      cls = 'keyword';
    }
    let quote = text[0];
    if (cls === 'string' && quote !== '"' && quote !== "'" && quote !== '`') quote = text[text.search(/["'`]/)];
    const inner = cls === 'string' && interp[quote];
    if (!inner) { emit(cls, from, to); continue; }
    // A string with variables in it: string pieces around var pieces.
    let at = 0;
    inner.lastIndex = 0;
    for (let v = inner.exec(text); v; v = inner.exec(text)) {
      if (text[v.index] === '\\' || text[v.index] === '`') continue;
      if (v.index > at) emit('string', from + at, from + v.index);
      at = v.index + v[0].length;
      emit('var', from + v.index, from + at);
    }
    if (to > from + at) emit('string', from + at, to);
  }
  if (source.length > plainFrom) out.push(['', source.slice(plainFrom)]);
  return out;
}

// ---- the highlighted copy ----

/** Lines kept in the copy above and below the ones in view. */
const MARGIN = 60;

/** The highlighted copy of a script, drawn into `code` (a <pre>'s <code>).
 *  Only the lines in view (and MARGIN more each side) are built, after as
 *  many empty lines as come before them, so that a long script costs one
 *  tokenizing pass per change and a few hundred spans, not its every token;
 *  the empty lines stack exactly as the textarea's own lines do. */
function highlighter(code) {
  let text = '';
  let tokens = [];
  let starts = []; // each token's offset in text
  let lines = [0]; // each line's offset in text
  let shown = null; // the lines drawn: [first, end)
  return {
    /** Takes `source` as a script of `glueType` (the copy is drawn again by
     *  the next `show`). */
    set(source, glueType) {
      text = source;
      tokens = tokenize(source, glueType);
      starts = new Array(tokens.length);
      let at = 0;
      for (let k = 0; k < tokens.length; k++) { starts[k] = at; at += tokens[k][1].length; }
      lines = [0];
      for (let i = source.indexOf('\n'); i >= 0; i = source.indexOf('\n', i + 1)) lines.push(i + 1);
      shown = null;
    },
    /** Draws lines [first, first + count) and their margins, unless drawn. */
    show(first, count) {
      const n = lines.length;
      const want = Math.min(first + count, n);
      if (shown && shown[0] <= first && shown[1] >= want) return;
      const from = Math.max(0, Math.min(first, n - 1) - MARGIN);
      const end = Math.min(n, want + MARGIN);
      draw(from, end);
      shown = [from, end];
    },
  };

  function draw(fromLine, endLine) {
    const from = lines[fromLine];
    const to = endLine < lines.length ? lines[endLine] : text.length;
    const fragment = document.createDocumentFragment();
    if (fromLine > 0) fragment.append('\n'.repeat(fromLine));
    // The first token that ends after `from`.
    let lo = 0;
    let hi = tokens.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid] + tokens[mid][1].length <= from) lo = mid + 1; else hi = mid;
    }
    for (let k = lo; k < tokens.length && starts[k] < to; k++) {
      const [cls, whole] = tokens[k];
      const piece = starts[k] >= from && starts[k] + whole.length <= to
        ? whole : whole.slice(Math.max(0, from - starts[k]), to - starts[k]);
      if (!cls) {
        fragment.append(piece); // a text node: never parsed
      } else {
        const span = document.createElement('span');
        span.className = `tok-${cls}`;
        span.textContent = piece;
        fragment.append(span);
      }
    }
    // A textarea shows a line after a final newline; a <pre> does not.
    if (endLine >= lines.length) fragment.append('\n');
    code.replaceChildren(fragment);
  }
}

// ---- the editor ----

let editors = 0;

/** Makes `textarea` a script editor for `glueType` and returns the element
 *  that holds it (put in the textarea's place when it is already in the
 *  document). The textarea stays the form control, with its id, name and
 *  attributes. Tab indents (two spaces, or every selected line);
 *  Shift+Tab, or Escape then Tab, leaves the field. `wrapper.setType(t)`
 *  switches the language; the copy follows the typing, and a value set
 *  from code (`textarea.value = …`) too. */
export function scriptEditor(textarea, glueType) {
  const wrapper = document.createElement('div');
  wrapper.className = 'editor';
  const box = document.createElement('div');
  box.className = 'editor-box';
  // The script is code, in no language of the console's.
  box.setAttribute('translate', 'no');
  const pre = document.createElement('pre');
  pre.setAttribute('aria-hidden', 'true');
  const code = document.createElement('code');
  pre.append(code);
  const keys = document.createElement('p');
  keys.className = 'editor-keys';
  keys.id = `editor-keys-${++editors}`;
  keys.textContent = t('editor.keys');
  if (textarea.parentNode) textarea.replaceWith(wrapper);
  box.append(pre, textarea);
  wrapper.append(box, keys);

  textarea.setAttribute('wrap', 'off');
  textarea.setAttribute('autocapitalize', 'off');
  textarea.setAttribute('autocomplete', 'off');
  textarea.spellcheck = false;
  // The key hint describes the field too (added again on focus, in case the
  // caller set aria-describedby afterwards).
  const describe = () => {
    const ids = (textarea.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean);
    if (!ids.includes(keys.id)) textarea.setAttribute('aria-describedby', [...ids, keys.id].join(' '));
  };
  describe();

  const view = highlighter(code);
  let type = glueType;
  let shownText = null;
  let shownType = null;
  let frame = 0;
  // The copy follows the textarea's scrolling, and has the lines in view.
  const sync = () => {
    code.style.transform = `translate(${-textarea.scrollLeft}px, ${-textarea.scrollTop}px)`;
    const line = parseFloat(getComputedStyle(textarea).lineHeight) || 20;
    view.show(Math.floor(textarea.scrollTop / line), Math.ceil(textarea.clientHeight / line) + 1);
  };
  const paint = () => {
    const text = textarea.value;
    if (text !== shownText || type !== shownType) {
      view.set(text, type);
      shownText = text;
      shownType = type;
    }
    sync();
  };
  const schedule = () => {
    if (!frame) frame = requestAnimationFrame(() => { frame = 0; paint(); });
  };

  // Setting the value from code (a template, a restored version) fires no
  // input event: re-highlight then too.
  const value = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, 'value');
  Object.defineProperty(textarea, 'value', {
    configurable: true,
    enumerable: true,
    get() { return value.get.call(this); },
    set(v) { value.set.call(this, v); schedule(); },
  });

  textarea.addEventListener('input', schedule);
  textarea.addEventListener('scroll', sync, { passive: true });
  textarea.addEventListener('focus', describe);
  // Resized by hand, or shown after being hidden: more lines in view.
  if (typeof ResizeObserver === 'function') new ResizeObserver(() => sync()).observe(textarea);

  let escaped = false;
  textarea.addEventListener('blur', () => { escaped = false; });
  textarea.addEventListener('keydown', (e) => {
    if (e.isComposing) return;
    if (e.key === 'Escape') { escaped = true; return; }
    const plain = !e.ctrlKey && !e.altKey && !e.metaKey;
    if (e.key === 'Tab' && plain) {
      if (escaped || e.shiftKey) { escaped = false; return; } // focus moves on
      e.preventDefault();
      indent(textarea);
      return;
    }
    if (e.key !== 'Shift') escaped = false;
    if (e.key === 'Enter' && plain && !e.shiftKey) {
      // A new line keeps the current line's indentation.
      const v = textarea.value;
      const at = textarea.selectionStart;
      const lead = /^[ \t]*/.exec(v.slice(v.lastIndexOf('\n', at - 1) + 1, at))[0];
      if (lead) { e.preventDefault(); insert(textarea, `\n${lead}`); }
    }
  });

  wrapper.setType = (g) => { type = g; paint(); };
  paint();
  return wrapper;
}

/** Types `text` over the selection, as typing would (undo keeps it). */
function insert(textarea, text) {
  let done = false;
  try { done = document.execCommand('insertText', false, text); } catch { done = false; }
  if (!done) {
    textarea.setRangeText(text, textarea.selectionStart, textarea.selectionEnd, 'end');
    textarea.dispatchEvent(new Event('input', { bubbles: true }));
  }
}

/** Tab: two spaces at the caret, or two more at the start of every line of
 *  a selection that spans lines. */
function indent(textarea) {
  const v = textarea.value;
  const start = textarea.selectionStart;
  let end = textarea.selectionEnd;
  if (v.slice(start, end).indexOf('\n') < 0) { insert(textarea, '  '); return; }
  if (v[end - 1] === '\n') end--; // the line after the selection's last newline is not in it
  const from = v.lastIndexOf('\n', start - 1) + 1;
  const lines = v.slice(from, end).replace(/^/gm, '  ');
  textarea.setSelectionRange(from, end);
  insert(textarea, lines);
  textarea.setSelectionRange(from, from + lines.length);
}
