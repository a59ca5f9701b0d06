// Validates Gateway API and Prometheus Operator objects against the JSON
// schemas generated from their CRDs (@kubernetes-models/gateway-api,
// @kubernetes-models/prometheus-operator, pinned in package.json).
//
//   node validate.mjs OBJECTS.json
//
// OBJECTS.json: a JSON array of objects (the toolgate-tests deploy tests
// write the chart's rendered HTTPRoutes, ServiceMonitors and PrometheusRules
// there). Prints one line per object;
// exits 1 when any is invalid, naming the object and the failing path.
// The CRDs' CEL rules (x-kubernetes-validations) are not evaluated here.
import { readFileSync } from "node:fs";
import { HTTPRoute } from "@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1/HTTPRoute";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

const kinds = {
  "gateway.networking.k8s.io/v1 HTTPRoute": HTTPRoute,
  "monitoring.coreos.com/v1 PrometheusRule": PrometheusRule,
  "monitoring.coreos.com/v1 ServiceMonitor": ServiceMonitor,
};
const objects = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const o of objects) {
  const id = `${o.apiVersion} ${o.kind}`;
  const name = `${id} ${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? "?"}`;
  const Model = kinds[id];
  if (!Model) {
    console.log(`${name}: no schema for ${id}`);
    failed++;
    continue;
  }
  try {
    new Model(o).validate();
    console.log(`${name}: valid`);
  } catch (e) {
    failed++;
    const details = (e.errors ?? []).map((d) => `  ${d.instancePath || "/"}: ${d.message}`);
    console.log([`${name}: INVALID: ${e.message}`, ...details].join("\n"));
  }
}
process.exit(failed ? 1 : 0);
