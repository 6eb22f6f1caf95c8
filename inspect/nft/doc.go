// Package nft reads what nftables holds on a node into the inspect model:
// `nft list ruleset` text (ParseText), `nft -j list ruleset` JSON
// (ParseJSON) and knftables' `add …` transactions (ParseKnftablesDump);
// ParseStatements reads one rule whole for the evaluator.
//
// # The pipeline
//
// Every reader feeds one builder (text.go) and ends in builder.finish. The
// stages, in order:
//
//  1. cut: a big input is cut into segments that workers parse at once.
//     JSON: cutJSONSegments cuts before `, {"rule":` or `, {"chain":`
//     (jsonpipe.go), a guess proven when the segment before ends there;
//     text: segmentCutter / cutSegments cut before `\tchain NAME {` lines
//     (textpar.go), checked by joinSegments. A guess that fails falls back
//     to the one-at-a-time reader (jsonArray; parseText), never to an
//     error of its own.
//  2. tape (JSON): jsonParser.value parses one object onto a reusable tape
//     of jsonValues (jsonparse.go); jsonobject.go reads tables and elements
//     off it in order and prepares rules, chains, sets and maps (on the
//     workers); the renderer (jsonrender.go) writes a rule's "expr" list as
//     the text nft lists, so that the analysis sees one syntax. Text lines
//     are read as substrings of 1 MiB blocks (lineReader).
//  3. record: each rule is a rawRule in the builder's ruleStore (text,
//     comment, handle), in runs of one chain; finish normalises the text
//     read as is (ruleStore.normalize) on every core.
//  4. materialise: builder.materialize turns a table's rawRules into one
//     array of NFTRules, written first on one goroutine (page faults), and
//     iptables-nft tables become IPTables instead (xtables.go, toIPTable
//     and fillIPRule).
//  5. analyse: ruleScratch.analyze fills each rule's inspect.NFTRuleInfo
//     from its text (rule.go, analyzer.run), one scratch per worker
//     (parallel.go, forChunks).
//
// # What may change where
//
//   - Strings point into input buffers, without a copy (unsafe.String):
//     jsonStream.buf, a segment's text, ParseText's data, the rule text
//     blocks (textBlock). A buffer is never written again once a string
//     may point into it: jsonStream.fill reads into the room after what
//     was read and moves on to a new buffer, never back. Do not reuse or
//     recycle a read buffer (TestParsedStringsOutliveInput fails).
//     What must outlive a parse without keeping its input alive (names,
//     comments) is cloned (strings.Clone, jsonComment).
//   - The tape lives until the next parse of its parser: a value read off
//     it is copied or rendered before the next object is parsed.
//   - A list of NFTRuleInfo ([]string) is filled through ruleScratch.lists:
//     the field goes into listFields (rule.go) and numLists grows by one,
//     or the rule costs an allocation per list again
//     (TestRuleListsInScratch, TestAnalyzeAllocatesNoLists).
//     NumgenTargets alone has its own scratch list (ruleScratch.numgen).
//   - The JSON parser takes what encoding/json takes, no more: numbers by
//     RFC 8259's grammar (jsonNumber), no control character in a string;
//     FuzzJSONParserAgainstRef holds it to json.Valid and to the recursive
//     descent in jsonref_test.go (errors and offsets included).
//   - Set and map elements are capped (setcap.go): MaxSetElements a set,
//     MaxRulesetElements an input, each reader warning in the same words;
//     the JSON parser drops the items of an "elem" array past the cap as
//     it reads them (capItems), so that they cost no tape. A text's
//     segments count together; over the total it is read in one piece.
//   - A fast path (segments, map bodies read ahead, the tape) checks its
//     guesses and falls back; tests and fuzz targets hold it equal to the
//     slow path, errors and warnings included. The slow path is chosen
//     with readOptions (readopts.go), passed down, never with a package
//     variable: tests that compare the paths run in parallel.
//
// # Where a new nft fact goes
//
//   - a field of inspect.NFTRuleInfo (inspect/model.go), written only here;
//   - its case in analyzer.run (rule.go), on tokens of the listed text
//     whatever the input format (kube-proxy's source spelling and nft's
//     canonical listing both), with a case in TestAnalyzeNFTRule; a list
//     field also in numLists (above);
//   - when it comes from a JSON statement or expression the renderer does
//     not know yet, its case in renderer.stmt or renderer.expr
//     (jsonrender.go), so that the rendered text is what `nft list`
//     prints (TestNFTJSONRendersLikeNFT and TestNFTFixtures hold the
//     formats equal on real rulesets).
package nft
