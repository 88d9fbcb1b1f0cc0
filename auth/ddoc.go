package auth

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
)

// usersValidate is _users/_design/_auth's validate_doc_update: the rules
// ValidateUserDoc applies, written for CouchDB's JavaScript query server,
// so a tool that reads the design doc (or a CouchDB replicating it) finds
// the rules it expects. settee itself runs ValidateUserDoc.
const usersValidate = `function (newDoc, oldDoc, userCtx, secObj) {
  var isAdmin = userCtx.roles.indexOf('_admin') !== -1;
  var sec = (secObj && secObj.admins) || {};
  (sec.names || []).forEach(function (n) { if (n === userCtx.name) isAdmin = true; });
  (sec.roles || []).forEach(function (r) { if (userCtx.roles.indexOf(r) !== -1) isAdmin = true; });
  function no(why) { throw({forbidden: why}); }
  if (newDoc._deleted === true) {
    if (isAdmin || (oldDoc && userCtx.name == oldDoc.name)) return;
    no('Only admins may delete other user docs.');
  }
  if (newDoc.type !== 'user') no('doc.type must be user');
  if (!newDoc.name) no('doc.name is required');
  if (!newDoc.roles) no('doc.roles must exist');
  if (!isArray(newDoc.roles)) no('doc.roles must be an array');
  newDoc.roles.forEach(function (r) { if (typeof r !== 'string') no('doc.roles can only contain strings'); });
  if (newDoc._id !== 'org.couchdb.user:' + newDoc.name) no('Doc ID must be of the form org.couchdb.user:name');
  if (oldDoc && oldDoc.name !== newDoc.name) no('Usernames can not be changed.');
  if (newDoc.password_sha && !newDoc.salt) no('Users with password_sha must have a salt.See /_utils/script/couch.js for example code.');
  var schemes = ['simple', 'pbkdf2', 'simple+pbkdf2'];
  if (newDoc.password_scheme && schemes.indexOf(newDoc.password_scheme) === -1) no('Password scheme ` + "`" + `' + newDoc.password_scheme + '` + "`" + ` not supported.');
  if (newDoc.password_scheme === 'pbkdf2') {
    if (typeof newDoc.iterations !== 'number') no('iterations must be a number.');
    if (typeof newDoc.derived_key !== 'string') no('derived_key must be a string.');
  }
  if (!isAdmin) {
    if (oldDoc) {
      if (userCtx.name !== newDoc.name) no('You may only update your own user document.');
      var was = (oldDoc.roles || []).slice().sort().join('\u0000');
      if (was !== newDoc.roles.slice().sort().join('\u0000')) no('Only _admin may edit roles');
    } else if (newDoc.roles.length > 0) {
      no('Only _admin may set roles');
    }
  }
  newDoc.roles.forEach(function (r) { if (r !== '_metrics' && r[0] === '_') no('No system roles (starting with underscore) in users db.'); });
  if (newDoc.name[0] === '_') no('Username may not start with underscore.');
  if (newDoc.name.indexOf(':') !== -1) no('Character ` + "`:`" + ` is not allowed in usernames.');
}`

// UsersDesignID is the design doc that holds _users' rules.
const UsersDesignID = "_design/_auth"

// UsersDesignDoc is _users/_design/_auth's body and its fixed rev: every
// node writes the same rev (new_edits=false), so nodes that each create it
// at their first start agree, with no conflict to resolve.
func UsersDesignDoc() (body []byte, rev string) {
	body, _ = json.Marshal(map[string]string{"language": "javascript", "validate_doc_update": usersValidate})
	sum := md5.Sum(body)
	return body, "1-" + hex.EncodeToString(sum[:])
}
