# The HTML dashboard (`bitparity report --html`): its data, its page, and the files the page
# inlines, embedded into the library with .incbin (reports/dashboard_assets.cpp). Included from
# reports/CMakeLists.txt.
#
# The chart libraries come from the npm registry (scripts/fetch_charts.sh: `npm ci` of the pinned
# package-lock.json into reports/dashboard/node_modules). Configuring never needs them: a build
# without them (the GPU machine, which has no network) builds a bitparity whose `report --html`
# exits 2 saying how to get them, and leaves the render test out.
set(BITPARITY_DASHBOARD_DIR ${CMAKE_CURRENT_SOURCE_DIR}/dashboard)
set(BITPARITY_CHART_FILES
    ${BITPARITY_DASHBOARD_DIR}/node_modules/vega/build/vega.min.js
    ${BITPARITY_DASHBOARD_DIR}/node_modules/vega-lite/build/vega-lite.min.js
    ${BITPARITY_DASHBOARD_DIR}/node_modules/vega-embed/build/vega-embed.min.js)
# OFF leaves the libraries out even where they are installed: a build like the GPU machine's.
option(BITPARITY_DASHBOARD_CHARTS "Embed the dashboard's chart libraries where node_modules has them" ON)
set(BITPARITY_HAVE_CHARTS ${BITPARITY_DASHBOARD_CHARTS})
foreach(file IN LISTS BITPARITY_CHART_FILES)
  if(NOT EXISTS ${file})
    set(BITPARITY_HAVE_CHARTS OFF)
  endif()
endforeach()
# Installing or updating node_modules touches the folder: configure again, so that a build made
# after scripts/fetch_charts.sh embeds the libraries without being told.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${BITPARITY_DASHBOARD_DIR})
if(EXISTS ${BITPARITY_DASHBOARD_DIR}/node_modules)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${BITPARITY_DASHBOARD_DIR}/node_modules)
endif()

add_library(bitparity_dashboard dashboard_data.cpp dashboard_html.cpp dashboard_assets.cpp)
target_link_libraries(bitparity_dashboard PUBLIC bitparity_reports bitparity_corpus)

set(embedded ${BITPARITY_DASHBOARD_DIR}/dashboard.js ${BITPARITY_DASHBOARD_DIR}/dashboard.css)
set_property(SOURCE dashboard_assets.cpp APPEND PROPERTY COMPILE_DEFINITIONS
             "BITPARITY_DASHBOARD_JS_PATH=\"${BITPARITY_DASHBOARD_DIR}/dashboard.js\""
             "BITPARITY_DASHBOARD_CSS_PATH=\"${BITPARITY_DASHBOARD_DIR}/dashboard.css\"")
if(BITPARITY_HAVE_CHARTS)
  list(GET BITPARITY_CHART_FILES 0 vega)
  list(GET BITPARITY_CHART_FILES 1 vega_lite)
  list(GET BITPARITY_CHART_FILES 2 vega_embed)
  set_property(SOURCE dashboard_assets.cpp APPEND PROPERTY COMPILE_DEFINITIONS
               "BITPARITY_VEGA_PATH=\"${vega}\"" "BITPARITY_VEGA_LITE_PATH=\"${vega_lite}\""
               "BITPARITY_VEGA_EMBED_PATH=\"${vega_embed}\"")
  list(APPEND embedded ${BITPARITY_CHART_FILES})
  message(STATUS "bitparity: the dashboard's chart libraries are embedded (reports/dashboard/node_modules)")
else()
  message(STATUS "bitparity: the dashboard's chart libraries are not embedded (reports/dashboard/node_modules "
                 "is missing, or BITPARITY_DASHBOARD_CHARTS=OFF): `bitparity report --html` exits 2 saying to run "
                 "scripts/fetch_charts.sh; the dashboard render test is left out")
endif()
set_property(SOURCE dashboard_assets.cpp APPEND PROPERTY OBJECT_DEPENDS ${embedded})

add_executable(dashboard_test dashboard_test.cpp)
target_compile_definitions(dashboard_test PRIVATE
                           BITPARITY_DASHBOARD_TESTDATA="${BITPARITY_DASHBOARD_DIR}/testdata"
                           BITPARITY_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(dashboard_test PRIVATE bitparity_dashboard GTest::gtest_main)
bitparity_test(dashboard_test cpu)

# The page in headless Chromium: no script error, every chart drawn with marks, every section
# present, hostile strings inert. Needs the chart libraries (so only where they were installed)
# and Chromium and Node.js, which scripts/setup.sh installs beside them.
if(BITPARITY_HAVE_CHARTS)
  find_program(BITPARITY_NODE NAMES node nodejs)
  find_program(BITPARITY_CHROMIUM NAMES chromium chromium-browser google-chrome)
  if(NOT BITPARITY_NODE)
    set(BITPARITY_NODE node)  # the test then fails saying so: setup.sh installs it with the libraries
  endif()
  if(NOT BITPARITY_CHROMIUM)
    set(BITPARITY_CHROMIUM chromium)
  endif()
  add_test(NAME dashboard_render
           COMMAND ${BITPARITY_NODE} ${BITPARITY_DASHBOARD_DIR}/render_test.mjs
                   --bitparity $<TARGET_FILE:bitparity> --chromium ${BITPARITY_CHROMIUM}
                   --testdata ${BITPARITY_DASHBOARD_DIR}/testdata --work ${CMAKE_CURRENT_BINARY_DIR}/dashboard_render)
  bitparity_timeout(cpu render_timeout)
  set_tests_properties(dashboard_render PROPERTIES LABELS cpu TIMEOUT ${render_timeout})
endif()
