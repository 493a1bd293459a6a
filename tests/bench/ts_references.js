// Ground truth for bench_graph_js.py: TypeScript's language service `findReferences` over plain JS.
//
//   node ts_references.js TYPESCRIPT_DIR < {"root", "files": [abs], "queries": [[abs file, line, col]], "mode"}
//
// Prints one list per query, in order: [[abs file, line (1-based), col (0-based), isDefinition]] of
// `findReferences`, or with "mode": "definitions" [[abs file, line, col]] of `getDefinitionAtPosition`
// (go to definition: it follows `exports.X = X` / `require` aliases that the reference search stops at).
// The JS files are read as a program with allowJs (CommonJS `require` and `module.exports` are
// followed as TypeScript does for JavaScript); nothing is type-checked or emitted.
"use strict";
const fs = require("fs");
const path = require("path");
const ts = require(path.resolve(process.argv[2], "node_modules", "typescript"));

const input = JSON.parse(fs.readFileSync(0, "utf8"));
const options = {
  allowJs: true,
  checkJs: false,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.CommonJS,
  moduleResolution: ts.ModuleResolutionKind.Node10,
  types: [],
};
const host = {
  getScriptFileNames: () => input.files,
  getScriptVersion: () => "1",
  getScriptSnapshot: (f) => (fs.existsSync(f) ? ts.ScriptSnapshot.fromString(fs.readFileSync(f, "utf8")) : undefined),
  getCurrentDirectory: () => input.root,
  getCompilationSettings: () => options,
  getDefaultLibFileName: (o) => ts.getDefaultLibFilePath(o),
  fileExists: ts.sys.fileExists,
  readFile: ts.sys.readFile,
  readDirectory: ts.sys.readDirectory,
  directoryExists: ts.sys.directoryExists,
  getDirectories: ts.sys.getDirectories,
};
const service = ts.createLanguageService(host, ts.createDocumentRegistry());
const program = service.getProgram();
const out = [];
for (const [file, line, col] of input.queries) {
  const sf = program.getSourceFile(file);
  const refs = [];
  if (sf) {
    const pos = sf.getPositionOfLineAndCharacter(line - 1, col);
    if (input.mode === "definitions") {
      for (const d of service.getDefinitionAtPosition(file, pos) || []) {
        const target = program.getSourceFile(d.fileName);
        if (!target) continue;
        const lc = target.getLineAndCharacterOfPosition(d.textSpan.start);
        refs.push([d.fileName, lc.line + 1, lc.character]);
      }
      out.push(refs);
      continue;
    }
    for (const sym of service.findReferences(file, pos) || []) {
      for (const r of sym.references) {
        const target = program.getSourceFile(r.fileName);
        if (!target) continue;
        const lc = target.getLineAndCharacterOfPosition(r.textSpan.start);
        refs.push([r.fileName, lc.line + 1, lc.character, Boolean(r.isDefinition)]);
      }
    }
  }
  out.push(refs);
}
process.stdout.write(JSON.stringify(out));
