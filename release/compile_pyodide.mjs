// Compile Python modules to sourceless bytecode with Pyodide's own interpreter (run by
// release/build.py under Node): node compile_pyodide.mjs PYODIDE_DIR JOB.json
// JOB.json: [[source, target, name shown in tracebacks], ...] as absolute host paths.
// Prints Pyodide's Python version ("3.14.0") on success.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [pyodideDir, jobFile] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({ indexURL: pyodideDir + path.sep, stdout: () => {}, stderr: console.error });
pyodide.FS.mkdir("/host");
pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root: "/" }, "/host");
pyodide.globals.set("job", readFileSync(jobFile, "utf8"));
const version = pyodide.runPython(`
import json, platform, py_compile
for source, target, shown in json.loads(job):
    py_compile.compile("/host" + source, cfile="/host" + target, dfile=shown, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
platform.python_version()
`);
console.log(version);
