// Prints the configuration table of src/config/schema.ts (pasted into README.md and docs/configuration.md).
import { configTable } from '../src/config/index.ts';

console.log(configTable());
