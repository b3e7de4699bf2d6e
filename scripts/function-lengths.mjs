#!/usr/bin/env node
// Census of function lengths and file sizes in src/ (issue 12: no function over ~80 lines
// without a reason in a comment).
//
//   node scripts/function-lengths.mjs                 # top 15 functions, top 10 files
//   node scripts/function-lengths.mjs --top 30        # more of each
//   node scripts/function-lengths.mjs --over 80       # only functions over 80 lines; exit 1 if
//                                                     # one lacks `// long-function: <reason>`
//   node scripts/function-lengths.mjs --root src/sync # another tree
//
// A function is a function declaration, method, constructor, accessor, arrow function or
// function expression. Its length is its lines from the first line of its declaration to the
// line of its closing brace, both included. A nested function counts in its parent's length
// too (it is in the parent's text) and is listed again on its own. The waiver is a line comment
// `// long-function: <reason>` on the line just above the function's first line (for an arrow
// function or function expression: above the statement or property that holds it).
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

const WAIVER = /^\s*\/\/\s*long-function:\s*\S/;

function parseArgs(argv) {
  const options = { root: "src", top: 15, topFiles: 10, over: undefined };
  for (let i = 0; i < argv.length; i += 1) {
    const flag = argv[i];
    if (flag === "--help" || flag === "-h") {
      console.log("usage: node scripts/function-lengths.mjs [--over N] [--top N] [--root DIR]");
      process.exit(0);
    }
    const value = argv[i + 1];
    i += 1;
    if (value === undefined || (flag !== "--root" && !Number.isFinite(Number(value)))) {
      throw new Error(`${flag} needs a value`);
    }
    if (flag === "--over") options.over = Number(value);
    else if (flag === "--top") options.top = options.topFiles = Number(value);
    else if (flag === "--root") options.root = value;
    else throw new Error(`unknown argument: ${flag}`);
  }
  return options;
}

function listTsFiles(dir) {
  const files = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...listTsFiles(path));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) files.push(path);
  }
  return files.sort();
}

function isFunctionLike(node) {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isGetAccessorDeclaration(node) ||
    ts.isSetAccessorDeclaration(node) ||
    ts.isArrowFunction(node) ||
    ts.isFunctionExpression(node)
  );
}

function propertyNameText(name) {
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name)) return name.text;
  if (ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return "[computed]";
}

/** The node whose first line carries the name and the waiver (the holder of an arrow function). */
function anchorOf(node) {
  if (!ts.isArrowFunction(node) && !ts.isFunctionExpression(node)) return node;
  let anchor = node;
  let parent = node.parent;
  while (parent && (ts.isParenthesizedExpression(parent) || ts.isAsExpression(parent))) {
    anchor = parent;
    parent = parent.parent;
  }
  if (parent && ts.isVariableDeclaration(parent)) {
    const list = parent.parent;
    return list && ts.isVariableDeclarationList(list) && ts.isVariableStatement(list.parent) ? list.parent : parent;
  }
  if (parent && (ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) return parent;
  return anchor;
}

function nameOf(node) {
  if (node.name) return propertyNameText(node.name);
  if (ts.isConstructorDeclaration(node)) return "constructor";
  let holder = node.parent;
  while (holder && (ts.isParenthesizedExpression(holder) || ts.isAsExpression(holder))) holder = holder.parent;
  if (holder && ts.isVariableDeclaration(holder)) return propertyNameText(holder.name);
  if (holder && (ts.isPropertyAssignment(holder) || ts.isPropertyDeclaration(holder))) {
    return propertyNameText(holder.name);
  }
  if (holder && ts.isCallExpression(holder)) {
    const callee = holder.expression.getText().replace(/\s+/g, "");
    return `<callback of ${callee.length > 40 ? `${callee.slice(0, 37)}...` : callee}>`;
  }
  return "<anonymous>";
}

function functionsOf(path) {
  const text = readFileSync(path, "utf8");
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const lines = text.split("\n");
  const found = [];
  const visit = (node) => {
    if (isFunctionLike(node) && node.body) {
      const anchor = anchorOf(node);
      const startLine = source.getLineAndCharacterOfPosition(anchor.getStart(source)).line;
      const endLine = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const above = startLine > 0 ? lines[startLine - 1] : "";
      found.push({
        file: path,
        line: startLine + 1,
        name: nameOf(node),
        length: endLine - startLine + 1,
        waived: WAIVER.test(above ?? ""),
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { functions: found, lines: text.endsWith("\n") ? lines.length - 1 : lines.length };
}

function describe(fn) {
  return `${relative(process.cwd(), fn.file)}:${fn.line} ${fn.name} ${fn.length}${fn.waived ? " (long-function)" : ""}`;
}

function main() {
  const options = parseArgs(process.argv.slice(2));
  const files = listTsFiles(options.root);
  const functions = [];
  const fileSizes = [];
  for (const file of files) {
    const census = functionsOf(file);
    functions.push(...census.functions);
    fileSizes.push({ file, lines: census.lines });
  }
  functions.sort((a, b) => b.length - a.length || a.file.localeCompare(b.file) || a.line - b.line);
  fileSizes.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));

  if (options.over !== undefined) {
    const over = functions.filter((fn) => fn.length > options.over);
    for (const fn of over) console.log(describe(fn));
    const unexplained = over.filter((fn) => !fn.waived);
    console.log(`${over.length} function(s) over ${options.over} lines, ${unexplained.length} without a // long-function: reason`);
    process.exit(unexplained.length > 0 ? 1 : 0);
  }

  console.log(`Longest functions (of ${functions.length} in ${files.length} files under ${options.root}/):`);
  for (const fn of functions.slice(0, options.top)) console.log(`  ${describe(fn)}`);
  console.log(`Largest files (lines):`);
  for (const f of fileSizes.slice(0, options.topFiles)) {
    console.log(`  ${relative(process.cwd(), f.file)} ${f.lines}`);
  }
  const over80 = functions.filter((fn) => fn.length > 80);
  console.log(`Functions over 80 lines: ${over80.length} (${over80.filter((fn) => fn.waived).length} with a reason)`);
}

main();
