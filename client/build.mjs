// Builds the browser client from src/: dist/edgecount.js, one minified ES module (esbuild),
// and dist/edgecount.d.ts, its type declarations in one file (the TypeScript compiler, then
// the per-module declarations merged into the entry's). The output is deterministic because
// dist/ is committed: `node client/build.mjs --check` builds into a temporary folder and
// fails when the committed files differ from a fresh build.
import {
  existsSync,
  mkdtempSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import * as esbuild from "esbuild";
import * as prettier from "prettier";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");
const entry = join(here, "src", "edgecount.ts");
const HEADER =
  "// edgecount browser client, built from client/src by client/build.mjs.\n";

/** The minified module's text and the names it exports. */
async function bundleJs() {
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    format: "esm",
    target: "es2020",
    minify: true,
    legalComments: "none",
    banner: { js: HEADER.trimEnd() },
    write: false,
    metafile: true,
    outfile: "edgecount.js",
    absWorkingDir: here,
    logLevel: "warning",
  });
  const [output] = Object.values(result.metafile.outputs);
  return { text: result.outputFiles[0].text, exports: output.exports };
}

/** Fails the build with the compiler's diagnostics, if there are any. */
function failOn(diagnostics) {
  if (diagnostics.length === 0) return;
  const host = {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => here,
    getNewLine: () => "\n",
  };
  console.error(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
  process.exit(1);
}

/** Type-checks src/ with tsconfig.json and answers each module's declarations, by module name. */
function emitDeclarations() {
  const configPath = join(here, "tsconfig.json");
  const { config, error } = ts.readConfigFile(configPath, ts.sys.readFile);
  if (error) failOn([error]);
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, here);
  failOn(parsed.errors);
  const program = ts.createProgram(parsed.fileNames, parsed.options);
  failOn(ts.getPreEmitDiagnostics(program));
  const modules = new Map();
  const emitted = program.emit(undefined, (fileName, text) => {
    modules.set(basename(fileName, ".d.ts"), text);
  });
  failOn(emitted.diagnostics);
  return modules;
}

const isLocal = (statement) =>
  statement.moduleSpecifier && statement.moduleSpecifier.text.startsWith("./");

/** Names a declaration statement declares. */
function declaredNames(statement) {
  if (ts.isVariableStatement(statement)) {
    return statement.declarationList.declarations.map((d) => d.name.getText());
  }
  return statement.name ? [statement.name.getText()] : [];
}

/**
 * One declaration file from the per-module ones: the entry's declarations, then those of the
 * modules it imports (transitively) that the entry exports, without the imports between them.
 * Anything else a kept declaration needs must be exported by the entry too, or the merged file
 * fails its type check below.
 */
function mergeDeclarations(modules) {
  const parse = (name) => {
    const text = modules.get(name);
    if (text === undefined) throw new Error(`no declarations for ./${name}`);
    return ts.createSourceFile(
      `${name}.d.ts`,
      text,
      ts.ScriptTarget.Latest,
      true,
    );
  };
  const root = parse("edgecount");
  const exported = new Set();
  for (const statement of root.statements) {
    if (ts.isExportDeclaration(statement) && isLocal(statement)) {
      statement.exportClause.elements.forEach((e) => exported.add(e.name.text));
    }
  }
  const seen = new Set(["edgecount"]);
  const queue = [root];
  const parts = [];
  while (queue.length) {
    const file = queue.shift();
    for (const statement of file.statements) {
      if (isLocal(statement)) {
        const name = statement.moduleSpecifier.text.slice(2);
        if (!seen.has(name)) {
          seen.add(name);
          queue.push(parse(name));
        }
        continue;
      }
      const keep =
        file === root
          ? !ts.isExportDeclaration(statement) ||
            statement.exportClause?.elements.length
          : declaredNames(statement).some((n) => exported.has(n));
      if (keep)
        parts.push(
          file.text.slice(statement.getFullStart(), statement.end).trim(),
        );
    }
  }
  return parts.join("\n\n") + "\n";
}

/** Checks the merged declarations compile alone and declare everything the module exports. */
function checkDeclarations(file, jsExports) {
  const program = ts.createProgram([file], {
    strict: true,
    noEmit: true,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
    types: [],
  });
  failOn(ts.getPreEmitDiagnostics(program));
  const checker = program.getTypeChecker();
  const symbol = checker.getSymbolAtLocation(program.getSourceFile(file));
  const declared = new Set(
    checker.getExportsOfModule(symbol).map((s) => s.name),
  );
  const missing = jsExports.filter((name) => !declared.has(name));
  if (missing.length) {
    console.error(`edgecount.d.ts does not declare: ${missing.join(", ")}`);
    process.exit(1);
  }
}

/** Builds into `outDir` and answers the files written. */
async function build(outDir) {
  const js = await bundleJs();
  const merged = HEADER + mergeDeclarations(emitDeclarations());
  const dts = await prettier.format(merged, { parser: "typescript" });
  mkdirSync(outDir, { recursive: true });
  const files = { "edgecount.js": js.text, "edgecount.d.ts": dts };
  // A file already as built is left alone: the worker compiles dist/ in, and a new
  // modification time would make cargo compile it again.
  for (const [name, text] of Object.entries(files)) {
    const path = join(outDir, name);
    if (!existsSync(path) || readFileSync(path, "utf8") !== text)
      writeFileSync(path, text);
  }
  checkDeclarations(join(outDir, "edgecount.d.ts"), js.exports);
  return files;
}

if (process.argv.includes("--check")) {
  const temp = mkdtempSync(join(tmpdir(), "edgecount-client-"));
  try {
    const fresh = await build(temp);
    const committed = readdirSync(dist, { withFileTypes: true })
      .map((d) => d.name)
      .sort();
    const stale =
      committed.join() !== Object.keys(fresh).sort().join() ||
      Object.entries(fresh).some(
        ([name, text]) => readFileSync(join(dist, name), "utf8") !== text,
      );
    if (stale) {
      console.error(
        `${relative(process.cwd(), dist)} differs from a fresh build: run node client/build.mjs`,
      );
      process.exit(1);
    }
    console.log(`${relative(process.cwd(), dist)} matches a fresh build`);
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
} else {
  const files = await build(dist);
  for (const name of readdirSync(dist))
    if (!(name in files)) rmSync(join(dist, name), { recursive: true });
  const js = Buffer.from(files["edgecount.js"]);
  console.log(
    `client/dist/edgecount.js: ${js.length} bytes minified, ${gzipSync(js, { level: 9 }).length} gzipped`,
  );
}
