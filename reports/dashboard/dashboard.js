// Draws the dashboard's charts (bitparity report --html) with Vega-Lite, from the rows that
// reports/dashboard_data.cpp writes into the page (the JSON element #bitparity-data). Inlined with
// the chart libraries; the tables beside the charts are plain HTML and need no script.
//
// Every chart's div carries data-chart="<name>"; a chart that fails, or whose rows are missing,
// is listed under the page's title (bitparityReportError), which the render test fails on. When
// every chart has settled, <body data-charts-done="N"> says how many were drawn.
(function () {
  'use strict';

  var SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';  // names the version; never fetched
  var reportError = window.bitparityReportError || function (what) { throw new Error(what); };

  function tooltip(fields) {
    return fields.map(function (f) { return {field: f[0], type: f[1], title: f[2] || f[0]}; });
  }

  var specs = {
    // Each kernel's share of the copy roofline over the history; the rule at 100 % is the roofline.
    bench: function (rows) {
      return {
        $schema: SCHEMA, width: 720, height: 320,
        layer: [
          {
            data: {values: rows},
            mark: {type: 'line', point: true},
            encoding: {
              x: {field: 'date', type: 'temporal', title: 'run date'},
              y: {field: 'pct_of_copy', type: 'quantitative', title: '% of copy bandwidth', scale: {domainMin: 0}},
              color: {field: 'kernel', type: 'nominal', legend: {orient: 'bottom', columns: 1, labelLimit: 640}},
              tooltip: tooltip([['kernel', 'nominal'], ['date', 'temporal'], ['commit', 'nominal'],
                                ['pct_of_copy', 'quantitative', '% of copy'], ['gb_per_s', 'quantitative', 'GB/s'],
                                ['copy_gb_per_s', 'quantitative', 'copy GB/s']])
            }
          },
          {
            data: {values: [{y: 100, label: 'copy roofline (100 %)'}]},
            layer: [
              {mark: {type: 'rule', strokeDash: [6, 4], color: '#555'}, encoding: {y: {field: 'y', type: 'quantitative'}}},
              {mark: {type: 'text', align: 'left', dx: 4, dy: -7, x: 0, color: '#555'},
               encoding: {y: {field: 'y', type: 'quantitative'}, text: {field: 'label'}}}
            ]
          }
        ]
      };
    },

    // Mismatching cases by op and contract pair, stacked by finding kind.
    findings: function (rows) {
      return {
        $schema: SCHEMA, width: 560,
        data: {values: rows},
        transform: [{calculate: "datum.op + ' | ' + datum.pair", as: 'group'}],
        mark: 'bar',
        encoding: {
          y: {field: 'group', type: 'nominal', title: null, axis: {labelLimit: 520}},
          x: {field: 'cases', type: 'quantitative', aggregate: 'sum', title: 'mismatching cases'},
          color: {field: 'kind', type: 'nominal', title: 'kind'},
          tooltip: tooltip([['op', 'nominal'], ['pair', 'nominal'], ['kind', 'nominal'], ['cases', 'quantitative'],
                            ['entries', 'quantitative', 'new entries']])
        }
      };
    },

    // One histogram per op, direction and pair: elements by ulp distance, the buckets in order.
    ulp: function (rows) {
      return {
        $schema: SCHEMA,
        data: {values: rows},
        columns: 2,
        facet: {field: 'panel', type: 'nominal', title: null, header: {labelLimit: 420, labelFontSize: 11}},
        spec: {
          width: 300, height: 150,
          mark: 'bar',
          encoding: {
            x: {field: 'bucket', type: 'ordinal', sort: {field: 'order', op: 'min'}, title: 'ulp distance',
                axis: {labelAngle: 0}},
            y: {field: 'elements', type: 'quantitative', title: 'elements', scale: {type: 'symlog'}},
            tooltip: tooltip([['panel', 'nominal', 'op, direction | pair'], ['bucket', 'ordinal', 'ulps'],
                              ['elements', 'quantitative']])
          }
        },
        resolve: {scale: {x: 'independent', y: 'independent'}}
      };
    },

    // Share of each op's cases in each edge class; required classes outlined, unreached ones red.
    coverage: function (rows) {
      var x = {field: 'tag', type: 'nominal', title: 'edge class', axis: {labelAngle: -40, labelLimit: 200}};
      var y = {field: 'target', type: 'nominal', title: null};
      return {
        $schema: SCHEMA, width: {step: 56}, height: {step: 26},
        data: {values: rows},
        layer: [
          {
            mark: {type: 'rect', strokeWidth: 2},
            encoding: {
              x: x, y: y,
              color: {field: 'share', type: 'quantitative', title: 'share of cases',
                      scale: {scheme: 'blues', domain: [0, 1]}},
              stroke: {condition: {test: 'datum.required', value: '#222'}, value: null},
              tooltip: tooltip([['target', 'nominal', 'op'], ['tag', 'nominal', 'class'],
                                ['cases', 'quantitative'], ['required', 'nominal']])
            }
          },
          {
            mark: {type: 'text', fontSize: 11},
            encoding: {
              x: x, y: y,
              text: {field: 'cases', type: 'quantitative'},
              color: {condition: [{test: 'datum.missing', value: '#c00'}, {test: 'datum.share > 0.5', value: 'white'}],
                      value: 'black'}
            }
          }
        ]
      };
    }
  };

  var data;
  try {
    data = JSON.parse(document.getElementById('bitparity-data').textContent);
  } catch (e) {
    reportError('the page data cannot be read: ' + e.message);
    return;
  }
  if (typeof vegaEmbed !== 'function') {
    reportError('the chart libraries are missing from the page');
    return;
  }

  var drawn = [];
  document.querySelectorAll('div.chart[data-chart]').forEach(function (el) {
    var name = el.getAttribute('data-chart');
    var rows = data[name];
    if (!specs.hasOwnProperty(name) || !Array.isArray(rows) || rows.length === 0) {
      reportError('chart ' + name + ': no rows to draw');
      return;
    }
    drawn.push(vegaEmbed(el, specs[name](rows), {renderer: 'svg', actions: false})
      .then(function () { el.setAttribute('data-rendered', 'true'); })
      .catch(function (e) { reportError('chart ' + name + ': ' + (e && e.message ? e.message : e)); }));
  });
  Promise.all(drawn).then(function () { document.body.setAttribute('data-charts-done', String(drawn.length)); });
})();
